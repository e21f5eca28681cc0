-- ack: the fenced ack of an owner.
--
-- KEYS[1] lease
-- KEYS[2] stream
-- KEYS[3] the lease's control hash (rdb.MetaKey): its field paused is the
--         partition's pause
-- ARGV[1] token
-- ARGV[2] group
-- ARGV[3] entry id
-- Returns XACK's count; the SEQBY_FENCED error when the lease does not
-- hold the token; the SEQBY_PAUSED error, after the ack, when an operator
-- paused the partition: an ack confirms the lease for the next entry,
-- which must not start then.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return redis.error_reply('SEQBY_FENCED lease ' .. KEYS[1] .. ' is not held by ' .. ARGV[1])
end
local n = redis.call('XACK', KEYS[2], ARGV[2], ARGV[3])
if redis.call('HGET', KEYS[3], 'paused') then
  return redis.error_reply('SEQBY_PAUSED partition of lease ' .. KEYS[1] .. ' is paused')
end
return n
