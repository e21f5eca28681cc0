-- acquire: take a free lease at the next generation, unless the partition
-- it covers is cold.
--
-- Uses cold() from lib/cold.lua, wake() from lib/wake.lua and the moves
-- of lib/groups.lua.
--
-- KEYS[1] lease (holds "<owner_id>:<generation>")
-- KEYS[2] the lease's control hash (rdb.MetaKey): its field gen holds the
--         last generation
-- KEYS[3] the earlier key layout's generation counter of the lease
--         (rdb.LeaseRef.Legacy), read and deleted at the first acquire
--         under this layout
-- KEYS[4..] the lanes the lease covers (optional: only for the cold check),
--           then w pairs: a partition stream it covers, its wake hash
--           (WakeKey)
-- ARGV[1] owner id
-- ARGV[2] ttl in milliseconds
-- ARGV[3] idle milliseconds after which the lanes count as cold (optional;
--         0 or absent: never)
-- ARGV[4] the group (a handler or a pm) the lease is for, its field in the
--         wake hashes (optional with ARGV[5])
-- ARGV[5] w, how many pairs end KEYS (optional; absent: 0)
-- ARGV[6] '1' to read the lanes through the generation's own consumer
--         group (lib/groups.lua), '0' or absent to keep the earlier
--         layout's shared group (ARGV[4]) while an engine of the earlier
--         build may read it (docs/upgrading.md); a lane already read
--         through generation groups keeps them either way, and so do the
--         lease's other lanes
-- Returns {1, generation, named, groups} when acquired, where named has
-- one character per pair, '1' where its wake hash names the owner now (the
-- stream exists), '0' where not (lib/wake.lua), and groups is 1 when the
-- lease reads through ARGV[4]@generation, which every existing lane now
-- has, carrying its predecessor's position and pending entries (with
-- their delivery counts) to the new token, 0 when through ARGV[4]; {0,
-- current token, groups} when held (groups as above for the holder, when
-- the holder is ARGV[1]'s, as a resend of this call finds it; else 0); {2}
-- when the lanes are cold: nothing to read, and idle long enough that the
-- partition is left for the reaper instead of being owned.
--
-- The generation is max(stored + 1, Redis TIME in microseconds), so it
-- never goes backwards even when the counter is lost or older than the
-- last lease (a restart without persistence or from an older snapshot, a
-- failover to a replica that missed writes, or a reaped partition): only a
-- server clock set back by more than the time since the last acquire
-- could repeat one. The earlier layout's counter counts as stored too
-- (once: it is deleted as the field takes it over), so a generation
-- after an upgrade is above every one the earlier release handed out,
-- even with a server clock set back since. TIME is safe in a script since Redis 7 replicates
-- scripts by their effects. Lua numbers are doubles, exact up to 2^53
-- (microseconds until the year 2255).
local idle = tonumber(ARGV[3] or '0')
local w = 2 * tonumber(ARGV[5] or '0')
local h = ARGV[4]
-- gen_lanes reports whether a lane is read through generation groups.
local function gen_lanes()
  for i = 4, #KEYS - w do
    if redis.call('TYPE', KEYS[i])['ok'] == 'stream' then
      local g = group_of(KEYS[i], h)
      if g and g.name ~= h then return true end
    end
  end
  return false
end
local cur = redis.call('GET', KEYS[1])
if cur then
  local groups = 0
  -- The caller's own lease (a resend of this call) answers as its first
  -- run did: its mode, or lanes already moved.
  if h and h ~= '' and string.sub(cur, 1, #ARGV[1] + 1) == ARGV[1] .. ':' and (ARGV[6] == '1' or gen_lanes()) then
    groups = 1
  end
  return {0, cur, groups}
end
if #KEYS - w > 3 and idle > 0 then
  local lanes = {}
  for i = 4, #KEYS - w do lanes[#lanes + 1] = KEYS[i] end
  if cold(lanes, idle) then
    -- Wanted, unowned: publishes wake everyone. Best effort: at maxmemory
    -- the write is refused, and the refusal still answers cold.
    pcall(wake, #KEYS - w + 1, #KEYS, ARGV[4], '')
    return {2}
  end
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
-- A counter is a generation only as the digits seqby writes, below 2^53
-- ("inf" or "1e30" would make a generation no engine parses): a corrupt
-- one of this layout refuses the acquire, naming the field to delete; a
-- corrupt one of the earlier layout is ignored.
local function counter(v)
  if type(v) ~= 'string' or not string.match(v, '^%d+$') then return nil end
  local n = tonumber(v)
  if n >= 2 ^ 53 then return nil end
  return n
end
local g = redis.call('HGET', KEYS[2], 'gen')
local stored = 0
if g then
  stored = counter(g)
  if not stored then
    return redis.error_reply('ERR the generation counter (field gen of ' .. KEYS[2] .. ') holds ' .. g ..
      ', not a generation: delete the field (HDEL)')
  end
end
local legacy = redis.pcall('GET', KEYS[3])
if type(legacy) == 'string' then
  stored = math.max(stored, counter(legacy) or 0)
end
local gen = math.max(stored + 1, now)
gen = string.format('%.0f', gen)
-- Every lane's move is planned before anything is written.
local plans = {}
local groups = 0
if h and h ~= '' and (ARGV[6] == '1' or gen_lanes()) then
  groups = 1
  for i = 4, #KEYS - w do
    plans[#plans + 1] = plan_move(KEYS[i], h, h .. '@' .. gen, '0')
  end
end
if type(legacy) == 'string' then redis.call('DEL', KEYS[3]) end
redis.call('HSET', KEYS[2], 'gen', gen)
local token = ARGV[1] .. ':' .. gen
redis.call('SET', KEYS[1], token, 'NX', 'PX', ARGV[2])
for _, p in ipairs(plans) do apply_move(p, token) end
local named = wake(#KEYS - w + 1, #KEYS, ARGV[4], ARGV[1])
return {1, gen, named, groups}
