-- record_halt: write a halt record while the lease holds the token, so a
-- stale owner never describes a head that has moved on.
--
-- KEYS[1] lease
-- KEYS[2] the handler's halts hash
-- ARGV[1] token
-- ARGV[2] field (the partition)
-- ARGV[3] record (JSON)
-- Returns HSET's count; the SEQBY_FENCED error when the lease does not
-- hold the token.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return redis.error_reply('SEQBY_FENCED lease ' .. KEYS[1] .. ' is not held by ' .. ARGV[1])
end
return redis.call('HSET', KEYS[2], ARGV[2], ARGV[3])
