-- release_cold: the owner lets a cold partition go, so the reaper can
-- remove it.
--
-- Uses cold() from lib/cold.lua, unwake() from lib/wake.lua and the moves
-- of lib/groups.lua.
--
-- KEYS[1] lease
-- KEYS[2] the lease's control hash (rdb.MetaKey): its field paused is the
--         partition's pause
-- KEYS[3..] the lanes the lease covers, then w pairs: a partition stream
--           it covers, its wake hash (WakeKey)
-- ARGV[1] token
-- ARGV[2] idle milliseconds after which the lanes count as cold
-- ARGV[3] the lease's group, its field in the wake hashes (optional)
-- ARGV[4] w (optional; absent: 0)
-- ARGV[5] '1' when the lease reads through its generation's group
--         (ARGV[3]@generation), which goes with the lease: each lane's
--         moves to the handler's parked group ARGV[3]@0 (lib/groups.lua)
-- Returns 1 when the lanes were cold and the lease was deleted, 0 when they
-- are not cold or an operator paused the partition (the owner keeps the
-- lease: a paused partition stays owned); the SEQBY_FENCED error when the
-- lease does not hold the token.
--
-- Checked and deleted in one script, so an entry appended before it keeps
-- the owner, and one appended after it finds the partition unowned, and
-- warm again for the next acquire.
--
-- Run twice (a client resends a call whose reply it lost), the second run
-- finds the lease gone: a missing lease over cold lanes replies 1 as the
-- first run did (if the lease expired instead, the partition was cold and
-- unowned all the same), and only a missing lease over lanes with work is
-- the lost lease it is.
local cur = redis.call('GET', KEYS[1])
if cur and cur ~= ARGV[1] then
  return redis.error_reply('SEQBY_FENCED lease ' .. KEYS[1] .. ' is not held by ' .. ARGV[1])
end
if cur and redis.call('HGET', KEYS[2], 'paused') then return 0 end
local w = 2 * tonumber(ARGV[4] or '0')
local lanes = {}
for i = 3, #KEYS - w do lanes[#lanes + 1] = KEYS[i] end
if not cold(lanes, tonumber(ARGV[2])) then
  if not cur then
    return redis.error_reply('SEQBY_FENCED lease ' .. KEYS[1] .. ' is not held by ' .. ARGV[1])
  end
  return 0
end
if cur and ARGV[5] == '1' then
  local plans = {}
  for _, s in ipairs(lanes) do plans[#plans + 1] = plan_move(s, ARGV[3], ARGV[3] .. '@0', '0') end
  -- Best effort, as in release.lua: the lease goes all the same.
  for _, p in ipairs(plans) do pcall(apply_move, p, ARGV[1]) end
end
unwake(#KEYS - w + 1, #KEYS, ARGV[3], ARGV[1])
if cur then redis.call('DEL', KEYS[1]) end
return 1
