-- begin_attempt: the fence of an attempt of a halted head. It verifies
-- the lease, as verify.lua does, and marks the attempt, so that an
-- operator's resolve of the head (lib/head.lua) refuses while it runs.
--
-- KEYS[1] lease
-- KEYS[2] the lease's control hash (rdb.MetaKey): fields attempt and
--         paused
-- ARGV[1] token
-- Returns 1; the SEQBY_FENCED error when the lease does not hold the token;
-- the SEQBY_PAUSED error, marking nothing, when an operator paused the
-- partition: a halted head's retry does not start on a paused key.
--
-- The mark is the token in the field attempt. It is valid only while the
-- lease holds that token: a resolve refuses only then, so a mark left by
-- an owner that lost the lease (or crashed) never blocks the operator,
-- and the mark needs no expiry. The owner deletes it once the attempt's
-- outcome is settled (end_attempt.lua).
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return redis.error_reply('SEQBY_FENCED lease ' .. KEYS[1] .. ' is not held by ' .. ARGV[1])
end
if redis.call('HGET', KEYS[2], 'paused') then
  return redis.error_reply('SEQBY_PAUSED partition of lease ' .. KEYS[1] .. ' is paused')
end
redis.call('HSET', KEYS[2], 'attempt', ARGV[1])
return 1
