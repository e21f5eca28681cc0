-- trim: retention of one stream: remove the entries every consumer group
-- has acked.
--
-- Uses older() from lib/ids.lua.
--
-- KEYS[1] stream (a partition stream, a backfill lane or an unpartitioned
--         category's stream; never a dead-letter stream)
-- ARGV[1..] the groups registered for the stream's category
-- Returns the number of entries removed.
--
-- A registered group missing on the stream is created from id 0 first: a
-- handler that has not read this stream yet keeps everything. Then the
-- stream is trimmed (XTRIM MINID, exact) to the smallest, over every group
-- on it, of the group's oldest pending entry, or, with nothing pending,
-- the id just after its last-delivered one: every entry below was
-- delivered to every group and acked. Redis runs Lua 5.1: no goto.
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local have = {}
for _, g in ipairs(redis.call('XINFO', 'GROUPS', KEYS[1])) do
  for j = 1, #g, 2 do
    if g[j] == 'name' then have[g[j + 1]] = true end
  end
end
for i = 1, #ARGV do
  if not have[ARGV[i]] then redis.call('XGROUP', 'CREATE', KEYS[1], ARGV[i], '0') end
end
local min
for _, g in ipairs(redis.call('XINFO', 'GROUPS', KEYS[1])) do
  local name, pending, last
  for j = 1, #g, 2 do
    if g[j] == 'name' then name = g[j + 1] end
    if g[j] == 'pending' then pending = g[j + 1] end
    if g[j] == 'last-delivered-id' then last = g[j + 1] end
  end
  local keep
  if pending > 0 then
    keep = redis.call('XPENDING', KEYS[1], name, '-', '+', 1)[1][1]
  else
    local ms, seq = string.match(last, '^(%d+)-(%d+)$')
    keep = ms .. '-' .. string.format('%.0f', tonumber(seq) + 1)
  end
  if not min or older(keep, min) then min = keep end
end
if not min or min == '0-1' then return 0 end
return redis.call('XTRIM', KEYS[1], 'MINID', min)
