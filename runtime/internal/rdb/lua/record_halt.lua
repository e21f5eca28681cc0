-- record_halt: write a partition's halt record while the lease holds the
-- token, so a stale owner never describes a head that has moved on.
--
-- KEYS[1] lease
-- KEYS[2] the halt record (HaltKey or PMHaltKey, in the lease's slot)
-- ARGV[1] token
-- ARGV[2] record (JSON)
-- Returns OK; the SEQBY_FENCED error when the lease does not hold the
-- token.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return redis.error_reply('SEQBY_FENCED lease ' .. KEYS[1] .. ' is not held by ' .. ARGV[1])
end
return redis.call('SET', KEYS[2], ARGV[2])
