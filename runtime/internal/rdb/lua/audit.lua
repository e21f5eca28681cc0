-- audit: append an operator action to the audit stream, once per op. An
-- append whose reply was lost is sent again with the same op (go-redis
-- resends it, a proxy may replay it): that run finds the op and answers
-- with the entry the first one appended, so one action is one entry.
--
-- KEYS[1] the audit stream (AuditKey)
-- KEYS[2] the op's key (AuditOpKey), in the stream's slot
-- ARGV[1] the stream's cap, about (XADD MAXLEN ~)
-- ARGV[2] how long the op is remembered, in milliseconds (OpTTL)
-- ARGV[3..] the entry's fields, name/value pairs
-- Returns the entry's id: the one appended now, or the one this op
-- appended before.
local prev = redis.call('GET', KEYS[2])
if prev then return prev end
local id = redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[1], '*', unpack(ARGV, 3))
redis.call('SET', KEYS[2], id, 'PX', ARGV[2])
return id
