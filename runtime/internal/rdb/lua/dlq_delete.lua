-- dlq_delete: remove an entry from a dead-letter stream, and the stream
-- with its last entry, so a drained DLQ leaves no empty key behind.
--
-- KEYS[1] the dead-letter stream (category:{key}:dlq)
-- ARGV[1] entry id
-- Returns 1 when the entry was deleted, 0 when it was not there.
if redis.call('XDEL', KEYS[1], ARGV[1]) == 0 then return 0 end
if redis.call('XLEN', KEYS[1]) == 0 then redis.call('DEL', KEYS[1]) end
return 1
