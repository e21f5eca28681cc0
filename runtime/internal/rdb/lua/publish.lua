-- publish: append one entry to a partition stream, record its key in the
-- category's index and signal idle consumers, in one atomic step, so a
-- consumer that sees the key or the signal always finds the entry.
--
-- KEYS[1] partition stream (or its backfill lane)
-- KEYS[2] category index (set of keys)
-- KEYS[3] category signal stream
-- ARGV[1] partition key
-- ARGV[2] signal stream MAXLEN (approximate)
-- ARGV[3..] the entry's field/value pairs
-- Returns the new entry's id.
local id = redis.call('XADD', KEYS[1], '*', unpack(ARGV, 3))
redis.call('SADD', KEYS[2], ARGV[1])
redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[2], '*', 'k', ARGV[1])
return id
