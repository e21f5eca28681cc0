-- begin_attempt: the fence of an attempt of a halted head. It verifies
-- the lease, as verify.lua does, and marks the attempt, so that an
-- operator's resolve of the head (lib/head.lua) refuses while it runs.
--
-- KEYS[1] lease
-- KEYS[2] the attempt mark (AttemptKey of the lease), in its slot
-- KEYS[3] the partition's pause mark (PauseKey of the lease)
-- ARGV[1] token
-- ARGV[2] the lease TTL in milliseconds, for a lease found without one
-- Returns 1; the SEQBY_FENCED error when the lease does not hold the token;
-- the SEQBY_PAUSED error, marking nothing, when an operator paused the
-- partition: a halted head's retry does not start on a paused key.
--
-- The mark holds the token and expires with the lease (its remaining
-- TTL): the owner renews it with the lease while the attempt runs and
-- deletes it once the attempt's outcome is settled, and a crashed owner's
-- mark ends by itself. A resolve refuses only while the mark holds the
-- lease's current token, so a mark left by an owner that lost the lease
-- never blocks the operator.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return redis.error_reply('SEQBY_FENCED lease ' .. KEYS[1] .. ' is not held by ' .. ARGV[1])
end
if redis.call('EXISTS', KEYS[3]) == 1 then
  return redis.error_reply('SEQBY_PAUSED partition of lease ' .. KEYS[1] .. ' is paused')
end
local ttl = redis.call('PTTL', KEYS[1])
if ttl <= 0 then ttl = ARGV[2] end
redis.call('SET', KEYS[2], ARGV[1], 'PX', ttl)
return 1
