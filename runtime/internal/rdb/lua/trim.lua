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
-- handler that has not read this stream yet keeps everything. A keyed
-- handler or pm g that reads through lease generations' groups has
-- g@<n> instead (lib/groups.lua), which counts as present; a g beside
-- one is an earlier build's, made here before the lane moved, and goes:
-- it would hold the stream at 0 for ever. Then the
-- stream is trimmed (XTRIM MINID, exact) to the smallest, over every group
-- on it, of the group's oldest pending entry, or, with nothing pending,
-- the id just after its last-delivered one: every entry below was
-- delivered to every group and acked. Redis runs Lua 5.1: no goto.
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local have, gen = {}, {}
for _, g in ipairs(redis.call('XINFO', 'GROUPS', KEYS[1])) do
  for j = 1, #g, 2 do
    if g[j] == 'name' then
      local name = g[j + 1]
      have[name] = true
      local base = string.match(name, '^(.*)@%d+$')
      if base then gen[base] = true end
    end
  end
end
for i = 1, #ARGV do
  if gen[ARGV[i]] then
    if have[ARGV[i]] then redis.call('XGROUP', 'DESTROY', KEYS[1], ARGV[i]) end
  elseif not have[ARGV[i]] then
    redis.call('XGROUP', 'CREATE', KEYS[1], ARGV[i], '0')
  end
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
