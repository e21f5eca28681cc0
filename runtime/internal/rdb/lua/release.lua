-- release: delete a lease that still holds this token, so the next owner
-- need not wait for the TTL, giving back the deliveries of the entries
-- its owner was handed and is not running.
--
-- KEYS[1] lease
-- KEYS[2..1+n] the lane of each entry to give back
-- KEYS[2+n..1+n+m] the lanes a lease reading through its generation's
--           group parks (lib/groups.lua), m of them; then pairs: a
--           partition stream the lease covers, its wake hash (WakeKey)
-- ARGV[1] token, also the consumer name
-- ARGV[2] the group the lease reads through (with entries or lanes)
-- ARGV[3] the handler or pm, its field in the wake hashes (with pairs),
--         and the prefix of its parked group (with lanes)
-- ARGV[4] m, how many lanes to park
-- ARGV[5..] the id of each entry to give back, one per lane in KEYS[2..]
--
-- Uses unwake() from lib/wake.lua: the group's field in the wake hashes
-- goes with the lease, where it still names this owner; and the moves of
-- lib/groups.lua: each lane's generation group moves to the handler's
-- parked group ARGV[3]@0, pending entries and delivery counts with it, so
-- the next owner finds them where a shared group would have kept them.
-- Returns 1 when deleted, 0 when not ours (then nothing changes).
--
-- A graceful release (a handover, a shutdown, a fault release) hands on
-- entries that are pending under this owner but were not in flight: a
-- halted head between its retries, entries read ahead and never run.
-- Reading them counted one delivery each; the next owner's read counts
-- another. MaxDeliveries is meant for messages that kill processes, so
-- the release takes this owner's delivery back (XCLAIM to itself with
-- RETRYCOUNT one less, JUSTID so it does not count again; on a parked
-- lane, the park's claim carries one less): a head handed over any number
-- of times keeps the count of the owners that died or stalled with it in
-- flight, plus the reading one.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
local m = tonumber(ARGV[4] or '0')
local n = math.max(#ARGV - 4, 0)
local plans, giveback = {}, {}
for i = 2 + n, 1 + n + m do
  plans[#plans + 1] = plan_move(KEYS[i], ARGV[3], ARGV[3] .. '@0', '0')
end
for i = 2, 1 + n do
  local id = ARGV[i + 3]
  if m > 0 then
    giveback[KEYS[i]] = giveback[KEYS[i]] or {}
    giveback[KEYS[i]][id] = true
  else
    local p = redis.pcall('XPENDING', KEYS[i], ARGV[2], id, id, 1)
    if type(p) == 'table' and not p.err and p[1] and p[1][2] == ARGV[1] then
      redis.call('XCLAIM', KEYS[i], ARGV[2], ARGV[1], 0, id, 'RETRYCOUNT', math.max(p[1][4] - 1, 0), 'JUSTID')
    end
  end
end
-- Parking is best effort: at maxmemory XGROUP CREATE is refused, and the
-- lease must go all the same (the next acquire moves the group left
-- behind, a lapsed generation's to it). A park refused half way leaves
-- h@0 beside the generation's group, which group_of takes for junk.
for _, p in ipairs(plans) do pcall(apply_move, p, ARGV[1], giveback) end
if #KEYS > 1 + n + m then unwake(2 + n + m, #KEYS, ARGV[3], ARGV[1]) end
return redis.call('DEL', KEYS[1])
