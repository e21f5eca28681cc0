-- admit_age: an engine incarnation records the admitted confirmation age
-- of a handler's attempts (runtime/attempt.go): it starts no attempt
-- whose lease confirmation was sent longer ago than that, and Pause waits
-- the largest one recorded out. A member is "<age ms>|<incarnation>",
-- scored by when it expires (Redis ms): a raise adds a member rather than
-- replacing one, so nothing a reader takes the largest of is ever
-- lowered, and a second run (or a late resend of a lower age) only adds
-- or re-adds what is there. Expired members go at each store; the set
-- itself expires with its last member.
--
-- KEYS[1] the handler's admitted-age set
-- ARGV[1] member "<age ms>|<incarnation>"
-- ARGV[2] ttl in milliseconds
-- Returns 1.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. now)
-- GT: a resend run later never moves a member's end earlier.
redis.call('ZADD', KEYS[1], 'GT', now + ttl, ARGV[1])
-- Only lengthen the set's life: another engine's member may end later.
-- Set it even when it stays the same: every run then writes, so a WAIT
-- after a second run (a resend on a new connection) counts from it.
redis.call('PEXPIRE', KEYS[1], math.max(redis.call('PTTL', KEYS[1]), ttl))
return 1
