-- verify: check, before an owner starts a handler attempt, that its lease
-- still holds its token.
--
-- KEYS[1] lease
-- KEYS[2] the lease's control hash (rdb.MetaKey): its field paused is the
--         partition's pause
-- ARGV[1] token
-- Returns 1; the SEQBY_FENCED error when the lease does not hold the token;
-- the SEQBY_PAUSED error when it does and an operator paused the
-- partition (its pause mark exists): no attempt starts.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return redis.error_reply('SEQBY_FENCED lease ' .. KEYS[1] .. ' is not held by ' .. ARGV[1])
end
if redis.call('HGET', KEYS[2], 'paused') then
  return redis.error_reply('SEQBY_PAUSED partition of lease ' .. KEYS[1] .. ' is paused')
end
return 1
