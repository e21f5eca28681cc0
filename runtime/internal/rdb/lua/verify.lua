-- verify: check, before an owner starts a handler attempt, that its lease
-- still holds its token.
--
-- KEYS[1] lease
-- ARGV[1] token
-- Returns 1; the SEQBY_FENCED error when the lease does not hold the token.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return redis.error_reply('SEQBY_FENCED lease ' .. KEYS[1] .. ' is not held by ' .. ARGV[1])
end
return 1
