-- record_halt: write a partition's halt record while the lease holds the
-- token, so a stale owner never describes a head that has moved on.
--
-- KEYS[1] lease
-- KEYS[2] the lease's control hash (rdb.MetaKey): the record goes in its
--         field halt
-- ARGV[1] token
-- ARGV[2] record (JSON)
-- Returns OK; the SEQBY_FENCED error when the lease does not hold the
-- token.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return redis.error_reply('SEQBY_FENCED lease ' .. KEYS[1] .. ' is not held by ' .. ARGV[1])
end
redis.call('HSET', KEYS[2], 'halt', ARGV[2])
return 'OK'
