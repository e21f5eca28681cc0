-- ack: the fenced ack of an owner.
--
-- KEYS[1] lease
-- KEYS[2] stream
-- ARGV[1] token
-- ARGV[2] group
-- ARGV[3] entry id
-- Returns XACK's count; the SEQBY_FENCED error when the lease does not
-- hold the token.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return redis.error_reply('SEQBY_FENCED lease ' .. KEYS[1] .. ' is not held by ' .. ARGV[1])
end
return redis.call('XACK', KEYS[2], ARGV[2], ARGV[3])
