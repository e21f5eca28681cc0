-- begin_attempt: the fence of an attempt of a halted head. It verifies
-- the lease, as verify.lua does, and marks the attempt, so that an
-- operator's resolve of the head (lib/head.lua) refuses while it runs.
--
-- KEYS[1] lease
-- KEYS[2] the lease's control hash (rdb.MetaKey): fields attempt and
--         paused
-- ARGV[1] token
-- ARGV[2] the lease TTL in milliseconds, for a lease found without one
-- Returns 1; the SEQBY_FENCED error when the lease does not hold the token;
-- the SEQBY_PAUSED error, marking nothing, when an operator paused the
-- partition: a halted head's retry does not start on a paused key.
--
-- The mark is "<token> <expiry>" in the field attempt, the expiry in
-- Redis milliseconds, the lease's own: the owner renews it with the lease
-- while the attempt runs (renew_many.lua) and deletes it once the
-- attempt's outcome is settled (end_attempt.lua). A resolve refuses only
-- while the mark names the lease's current token and has not expired, so
-- a mark left by an owner that lost the lease, crashed, or failed to
-- delete it blocks the operator no longer than a lease TTL. Run twice,
-- it writes the same mark with a later expiry.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return redis.error_reply('SEQBY_FENCED lease ' .. KEYS[1] .. ' is not held by ' .. ARGV[1])
end
if redis.call('HGET', KEYS[2], 'paused') then
  return redis.error_reply('SEQBY_PAUSED partition of lease ' .. KEYS[1] .. ' is paused')
end
local ttl = redis.call('PTTL', KEYS[1])
if ttl <= 0 then ttl = tonumber(ARGV[2]) end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('HSET', KEYS[2], 'attempt', ARGV[1] .. ' ' .. (now + ttl))
return 1
