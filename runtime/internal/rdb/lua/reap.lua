-- reap: remove a cold partition's keys, the first step of reaping it
-- (rdb.Reap then takes its key out of the category's index).
--
-- Uses cold() from lib/cold.lua.
--
-- KEYS[1..n] the partition's lanes (n = ARGV[2]: its stream, its backfill
--            lane)
-- KEYS[n+1..] nine keys per group of ARGV[3+n..], in that order: its
--            partition lease, its pm lease on the key, the partition
--            lease's control hash (rdb.MetaKey), its pm state on the key
--            (a hash, when the group is a pm's: the pm lease's control
--            hash), then the earlier layout's keys of the partition
--            (docs/upgrading.md): its partition generation, its pm
--            generation, its partition halt record, its partition pause
--            mark, its pm pause mark
-- KEYS[#KEYS] the partition's wake hash (WakeKey), deleted with it
-- ARGV[1] idle milliseconds after which the lanes count as cold
-- ARGV[2] n
-- ARGV[3..2+n] the applied-mark field of each lane in a pm state
--              (rdb.AppliedField)
-- ARGV[3+n..] every group that may read the lanes (the category's
--             registered groups, and any other the caller found on them)
-- Returns {1} when reaped, {0} when kept (not cold, a lease is held, an
-- operator paused it for a group, a lease was acquired within the idle
-- time, or an operator resolved a halted head within the idle time and
-- its note has not expired: the halted owner and a resend of the resolve
-- read it),
-- {-1, group...} when a lane has a group not in ARGV: call again with those
-- groups too, so their leases and states are covered. A lease
-- generation's group g@<n> (lib/groups.lua) is g's.
--
-- One script, in the partition's slot: an entry appended before it keeps
-- the partition; one appended after it recreates the stream, and its
-- publisher indexes the key again after appending (rdb.Publish).
-- The dead-letter stream and a pm's state are kept, but a pm state's
-- applied marks of the deleted lanes go with them: a recreated lane's ids
-- follow the server clock only, and after a clock step-back (or a
-- failover to a server whose clock is behind) they may fall below the old
-- mark, which would have the pm ack new entries without applying them.
-- Every entry the mark covers is acked (the lanes are cold), so it has
-- nothing left to dedupe; and no owner can write one after this script:
-- the pm lease is free here, and a state save is fenced by it. The mark is
-- blanked (HSET to "", which the loader reads as no mark) rather than
-- deleted, and only where one exists, so a state is never created.
-- The generations can go: acquire.lua never reuses one without them.
local n = tonumber(ARGV[2])
local last = #KEYS - 1 -- the group keys end before the wake hash
local lanes, known, unknown = {}, {}, {}
for i = 1, n do lanes[i] = KEYS[i] end
for i = 3 + n, #ARGV do known[ARGV[i]] = true end
for _, s in ipairs(lanes) do
  if redis.call('EXISTS', s) == 1 then
    for _, g in ipairs(redis.call('XINFO', 'GROUPS', s)) do
      for j = 1, #g, 2 do
        if g[j] == 'name' then
          local name = string.match(g[j + 1], '^(.*)@%d+$') or g[j + 1]
          if not known[name] then
            known[name] = true
            unknown[#unknown + 1] = name
          end
        end
      end
    end
  end
end
if #unknown > 0 then
  table.insert(unknown, 1, -1)
  return unknown
end
-- A paused partition is never reaped: its pause stays until Resume, and
-- the partition with it (a pause of the earlier layout too, until the
-- migration moves it).
for i = n + 1, last, 9 do
  if redis.call('EXISTS', KEYS[i], KEYS[i + 1], KEYS[i + 7], KEYS[i + 8]) > 0 or
      redis.call('HGET', KEYS[i + 2], 'paused') or redis.call('HGET', KEYS[i + 3], 'paused') then
    return {0}
  end
end
if not cold(lanes, tonumber(ARGV[1])) then return {0} end
-- A generation goes only once it is older than the idle time too
-- (a generation is at least its acquire's Redis time in µs): the next
-- acquire then takes the Redis time, above it by at least that margin,
-- even after a failover to a server whose clock is somewhat behind.
local t = redis.call('TIME')
local newest = (tonumber(t[1]) - tonumber(ARGV[1]) / 1000) * 1000000 + tonumber(t[2])
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
for i = n + 1, last, 9 do
  -- An operator's resolve counts as activity: the partition is kept
  -- until its note expires (the halted owner and a resend of the resolve
  -- read it) or the idle time has passed since, whichever is first (an
  -- idle time shorter than a heartbeat may leave the halted owner no
  -- note to read: it then reports a lost lease, not a resolution).
  local note = redis.call('HGET', KEYS[i + 2], 'resolved')
  if note then
    local ok, r = pcall(cjson.decode, note)
    if ok and type(r) == 'table' then
      local exp = tonumber(r.exp) or 0
      local keep = math.min(exp, (tonumber(r.at) or exp) + tonumber(ARGV[1]))
      if keep > now then return {0} end
    end
  end
  local gens = {redis.call('HGET', KEYS[i + 2], 'gen'), redis.call('HGET', KEYS[i + 3], 'gen'),
    redis.call('GET', KEYS[i + 4]), redis.call('GET', KEYS[i + 5])}
  for j = 1, 4 do
    -- A counter that is not seqby's digits is no generation: it goes.
    local g = gens[j]
    g = type(g) == 'string' and string.match(g, '^%d+$') and tonumber(g) or 0
    if g > newest then return {0} end
  end
end
redis.call('DEL', KEYS[#KEYS])
for i = 1, n do redis.call('DEL', KEYS[i]) end
for i = n + 1, last, 9 do
  -- The partition's control hash goes whole (its lease is free: an
  -- attempt mark is void, a halt record stale, a note past its use); a
  -- pm's keeps all but its generation, as its lease covers the value's
  -- partitions in other categories too.
  redis.call('DEL', KEYS[i + 2], KEYS[i + 4], KEYS[i + 5], KEYS[i + 6])
  redis.call('HDEL', KEYS[i + 3], 'gen')
  for j = 1, n do
    if redis.call('HGET', KEYS[i + 3], ARGV[2 + j]) then redis.call('HSET', KEYS[i + 3], ARGV[2 + j], '') end
  end
end
return {1}
