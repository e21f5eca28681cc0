-- reap: remove a cold partition's keys, the first step of reaping it
-- (rdb.Reap then takes its key out of the category's index).
--
-- Uses cold() from lib/cold.lua.
--
-- KEYS[1..n] the partition's lanes (n = ARGV[2]: its stream, its backfill
--            lane)
-- KEYS[n+1..] five keys per group of ARGV[3..], in that order: its
--            partition lease, its pm lease on the key, its partition
--            generation, its pm generation, its partition halt record
-- ARGV[1] idle milliseconds after which the lanes count as cold
-- ARGV[2] n
-- ARGV[3..] every group that may read the lanes (the category's registered
--           groups, and any other the caller found on them)
-- Returns {1} when reaped, {0} when kept (not cold, a lease is held, or a
-- lease was acquired within the idle time),
-- {-1, group...} when a lane has a group not in ARGV: call again with those
-- groups too, so their leases are checked.
--
-- One script, in the partition's slot: an entry appended before it keeps
-- the partition; one appended after it recreates the stream, and its
-- publisher indexes the key again after appending (rdb.Publish).
-- The dead-letter stream and a pm's state are never touched. The
-- generations can go: acquire.lua never reuses one without them.
local n = tonumber(ARGV[2])
local lanes, known, unknown = {}, {}, {}
for i = 1, n do lanes[i] = KEYS[i] end
for i = 3, #ARGV do known[ARGV[i]] = true end
for _, s in ipairs(lanes) do
  if redis.call('EXISTS', s) == 1 then
    for _, g in ipairs(redis.call('XINFO', 'GROUPS', s)) do
      for j = 1, #g, 2 do
        if g[j] == 'name' and not known[g[j + 1]] then
          known[g[j + 1]] = true
          unknown[#unknown + 1] = g[j + 1]
        end
      end
    end
  end
end
if #unknown > 0 then
  table.insert(unknown, 1, -1)
  return unknown
end
for i = n + 1, #KEYS, 5 do
  if redis.call('EXISTS', KEYS[i], KEYS[i + 1]) > 0 then return {0} end
end
if not cold(lanes, tonumber(ARGV[1])) then return {0} end
-- A generation counter goes only once it is older than the idle time too
-- (a generation is at least its acquire's Redis time in µs): the next
-- acquire then takes the Redis time, above it by at least that margin,
-- even after a failover to a server whose clock is somewhat behind.
local t = redis.call('TIME')
local newest = (tonumber(t[1]) - tonumber(ARGV[1]) / 1000) * 1000000 + tonumber(t[2])
for i = n + 3, #KEYS, 5 do
  for _, k in ipairs({KEYS[i], KEYS[i + 1]}) do
    local g = tonumber(redis.call('GET', k) or '0')
    if g and g > newest then return {0} end
  end
end
for i = 1, #KEYS do
  if i <= n or (i - n - 1) % 5 >= 2 then redis.call('DEL', KEYS[i]) end
end
return {1}
