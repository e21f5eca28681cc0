-- dlq_replay: move a dead-letter entry's message back to the end of its
-- partition in one step: the entry is deleted from the dead-letter stream
-- (and the stream with its last entry) as the message is appended, and
-- nothing is appended when the entry is gone, so two operators replaying
-- it at once publish it once. Publish's entry step (publish.go).
--
-- KEYS[1] the partition stream (or lane) to append to
-- KEYS[2] the dead-letter stream, in the same slot (category:{key}:dlq)
-- ARGV[1] the dead-letter entry id
-- ARGV[2..] the message's field/value pairs, then the replay_* pairs that
--           say what the entry originally was (rdb.Replayed: the original
--           entry id and lane, this dead-letter entry, the halted
--           handler), so a handler can tell the replay from a duplicate
-- Returns the appended entry's id, or the error NODLQENTRY.
if redis.call('XDEL', KEYS[2], ARGV[1]) == 0 then
  return redis.error_reply('NODLQENTRY the dead-letter entry is gone: replayed or dropped meanwhile')
end
if redis.call('XLEN', KEYS[2]) == 0 then redis.call('DEL', KEYS[2]) end
return redis.call('XADD', KEYS[1], '*', unpack(ARGV, 2))
