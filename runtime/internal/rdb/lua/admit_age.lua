-- admit_age: an engine incarnation records the admitted confirmation age
-- of a handler's attempts (package lease, the gate): it starts no attempt
-- whose lease confirmation was sent longer ago than that, and Pause waits
-- the largest one recorded out. A record is the field
-- "admit:<age ms>|<incarnation>" of the handler's control hash, holding
-- when it ends (Redis ms): a raise adds a record rather than replacing
-- one, so nothing a reader takes the largest of is ever lowered, and a
-- second run (or a late resend of a lower age) only adds or re-adds what
-- is there. Ended records go at each store.
--
-- KEYS[1] the handler's control hash (rdb.ControlKey)
-- ARGV[1] member "<age ms>|<incarnation>"
-- ARGV[2] ttl in milliseconds
-- Returns 1.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local all = redis.call('HGETALL', KEYS[1])
local field = 'admit:' .. ARGV[1]
local ends = now + tonumber(ARGV[2])
for i = 1, #all, 2 do
  if string.sub(all[i], 1, 6) == 'admit:' then
    local e = tonumber(all[i + 1]) or 0
    if all[i] == field then
      -- A resend run later never moves a record's end earlier.
      ends = math.max(ends, e)
    elseif e < now then
      redis.call('HDEL', KEYS[1], all[i])
    end
  end
end
-- Written on every run, even unchanged: a WAIT after a second run (a
-- resend on a new connection) then counts from it.
redis.call('HSET', KEYS[1], field, string.format('%.0f', ends))
return 1
