-- read_oldest: the fenced read of a process manager's owner, which reads
-- every stream of its correlation value and applies the oldest entry first.
--
-- Uses read_oldest_lanes() from lib/oldest.lua (the read itself, shared
-- with round.lua), which uses older() from lib/ids.lua and deliveries()
-- from lib/pel.lua.
--
-- KEYS[1] lease
-- KEYS[2] the lease's control hash (rdb.MetaKey): its field paused is the
--         partition's pause
-- KEYS[3..] lanes: the primary streams first (ARGV[3] of them), then the
--           backfill lanes
-- ARGV[1] token, also the consumer name
-- ARGV[2] group (the pm's name)
-- ARGV[3] number of primary lanes
-- ARGV[4] the lane (1-based) of the entry to ack first, 0 for none
-- ARGV[5] the id of that entry
-- Returns {lane (1-based among the lanes), {entry}, its deliveries}, or {0} when every lane
-- is drained; the SEQBY_FENCED error when the lease does not hold the token;
-- the SEQBY_PAUSED error, after the ack, when an operator paused it.
-- lib/oldest.lua tells how the read goes (pending first, then the oldest
-- new entry, peeked without delivering the others).
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return redis.error_reply('SEQBY_FENCED lease ' .. KEYS[1] .. ' is not held by ' .. ARGV[1])
end
-- The previous entry's ack rides on this read: one script call per entry.
-- Acking after the fence check keeps it fenced, as ack.lua is.
local ack = tonumber(ARGV[4])
if ack and ack > 0 then redis.call('XACK', KEYS[ack + 2], ARGV[2], ARGV[5]) end
if redis.call('HGET', KEYS[2], 'paused') then
  return redis.error_reply('SEQBY_PAUSED partition of lease ' .. KEYS[1] .. ' is paused')
end
local lanes = {}
for i = 3, #KEYS do lanes[i - 2] = KEYS[i] end
return read_oldest_lanes(lanes, ARGV[1], ARGV[2], tonumber(ARGV[3]))
