-- release: delete a lease that still holds this token, so the next owner
-- need not wait for the TTL, giving back the deliveries of the entries
-- its owner was handed and is not running.
--
-- KEYS[1] lease
-- KEYS[2..] (optional) the lane of each entry to give back, then pairs:
--           a partition stream the lease covers, its wake hash (WakeKey)
-- ARGV[1] token, also the consumer name
-- ARGV[2] group (with entries or wake hashes)
-- ARGV[3..] the id of each entry to give back, one per lane in KEYS
--
-- Uses unwake() from lib/wake.lua: the group's field in the wake hashes
-- goes with the lease, where it still names this owner.
-- Returns 1 when deleted, 0 when not ours (then nothing changes).
--
-- A graceful release (a handover, a shutdown, a fault release) hands on
-- entries that are pending under this owner but were not in flight: a
-- halted head between its retries, entries read ahead and never run.
-- Reading them counted one delivery each; the next owner's read counts
-- another. MaxDeliveries is meant for messages that kill processes, so
-- the release takes this owner's delivery back (XCLAIM to itself with
-- RETRYCOUNT one less, JUSTID so it does not count again): a head
-- handed over any number of times keeps the count of the owners that
-- died or stalled with it in flight, plus the reading one.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
local n = math.max(#ARGV - 2, 0)
for i = 2, 1 + n do
  local id = ARGV[i + 1]
  local p = redis.pcall('XPENDING', KEYS[i], ARGV[2], id, id, 1)
  if type(p) == 'table' and not p.err and p[1] and p[1][2] == ARGV[1] then
    redis.call('XCLAIM', KEYS[i], ARGV[2], ARGV[1], 0, id, 'RETRYCOUNT', math.max(p[1][4] - 1, 0), 'JUSTID')
  end
end
if #KEYS > 1 + n then unwake(2 + n, #KEYS, ARGV[2], ARGV[1]) end
return redis.call('DEL', KEYS[1])
