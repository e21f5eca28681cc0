-- read: the fenced read of a keyed partition's owner.
--
-- Uses read_lanes() from lib/read.lua (the read itself, shared with
-- round.lua), which uses deliveries() from lib/pel.lua.
--
-- KEYS[1] lease
-- KEYS[2] the lease's control hash (rdb.MetaKey): its field paused is the
--         partition's pause
-- KEYS[3..] lanes in priority order (the partition stream, its backfill lane)
-- ARGV[1] token, also the consumer name
-- ARGV[2] group (the handler's name)
-- ARGV[3] how many new entries of the first lane to read at most (read
--         ahead; every other read takes one entry)
-- ARGV[4] the lane (1-based) of the entry to ack first, 0 for none
-- ARGV[5] the id of that entry
-- Returns read_lanes()'s reply: {lane (1-based among the lanes), entries,
-- deliveries of the first entry, 1 when it came from the pending pass else
-- 0, 1 when more may be waiting else 0}, or {0} when every lane is
-- drained; the SEQBY_FENCED error when the lease does not hold the token;
-- the SEQBY_PAUSED error, after the ack, when an operator paused the
-- partition (nothing is read).
-- lib/read.lua tells how the read goes (pending pass first, read ahead).
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
return read_lanes(lanes, ARGV[1], ARGV[2], ARGV[3])
