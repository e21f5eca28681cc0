-- dlq_delete: remove an entry from a dead-letter stream, and the stream
-- with its last entry, so a drained DLQ leaves no empty key behind.
--
-- A drop that Redis runs twice (its reply lost, then resent by go-redis or
-- a proxy) finds the entry gone. Before it answers 0, it looks for its op
-- at the entry's op key: when the drop was this op's, it answers 1 as the
-- first run did. Another operator's drop, or a replay, carries another op.
--
-- KEYS[1] the dead-letter stream (category:{key}:dlq)
-- KEYS[2] the entry's op key (DLQOpKey), in the same slot
-- ARGV[1] entry id
-- ARGV[2] the call's op (NewOp)
-- ARGV[3] how long the op is kept, in milliseconds (OpTTL)
-- Returns 1 when the entry was deleted (by this op), 0 when it was not
-- there.
local mine = ARGV[2] .. ' '
if #redis.call('XRANGE', KEYS[1], ARGV[1], ARGV[1]) == 0 then
  local done = redis.call('GET', KEYS[2])
  if done and string.sub(done, 1, #mine) == mine then return 1 end
  return 0
end
-- The op first: a user not allowed to write it fails before anything
-- changed.
redis.call('SET', KEYS[2], mine, 'PX', ARGV[3])
redis.call('XDEL', KEYS[1], ARGV[1])
if redis.call('XLEN', KEYS[1]) == 0 then redis.call('DEL', KEYS[1]) end
return 1
