-- dlq_replay: move a dead-letter entry's message back to the end of its
-- partition in one step: the entry is deleted from the dead-letter stream
-- (and the stream with its last entry) as the message is appended, and
-- nothing is appended when the entry is gone, so two operators replaying
-- it at once publish it once. Publish's entry step (publish.go).
--
-- A replay that Redis runs twice (its reply lost, then resent by go-redis,
-- a proxy, or the caller, as a MULTI/EXEC is not resent by go-redis) finds
-- the entry gone. Before it refuses, it looks for its op at the entry's op
-- key: when the move was this op's, it answers as the first run did, with
-- the appended entry's id. Another operator's replay, or a drop, carries
-- another op, and is refused.
--
-- KEYS[1] the partition stream (or lane) to append to
-- KEYS[2] the dead-letter stream, in the same slot (category:{key}:dlq)
-- KEYS[3] the dead-letter entry's op key (DLQOpKey), in the same slot
-- ARGV[1] the dead-letter entry id
-- ARGV[2] the call's op (NewOp)
-- ARGV[3] how long the op is kept, in milliseconds (OpTTL)
-- ARGV[4..] the message's field/value pairs, then the replay_* pairs that
--           say what the entry originally was (rdb.Replayed: the original
--           entry id and lane, this dead-letter entry, the halted
--           handler), so a handler can tell the replay from a duplicate
-- Returns the appended entry's id, or the error NODLQENTRY.
local mine = ARGV[2] .. ' '
if #redis.call('XRANGE', KEYS[2], ARGV[1], ARGV[1]) == 0 then
  local done = redis.call('GET', KEYS[3])
  if done and string.sub(done, 1, #mine) == mine then
    return string.sub(done, #mine + 1)
  end
  return redis.error_reply('NODLQENTRY the dead-letter entry is gone: replayed or dropped meanwhile')
end
-- The op first: a user not allowed to write it fails before anything
-- changed.
redis.call('SET', KEYS[3], mine, 'PX', ARGV[3])
redis.call('XDEL', KEYS[2], ARGV[1])
if redis.call('XLEN', KEYS[2]) == 0 then redis.call('DEL', KEYS[2]) end
local id = redis.call('XADD', KEYS[1], '*', unpack(ARGV, 4))
redis.call('SET', KEYS[3], mine .. id, 'PX', ARGV[3])
return id
