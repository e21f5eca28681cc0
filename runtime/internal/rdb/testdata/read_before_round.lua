-- pel: pending-entries-list helpers, prepended to the scripts that use
-- them.

-- deliveries(stream, group, id) is how many times the entry was delivered
-- in group (XREADGROUP and XCLAIM count), 0 when it is not pending.
local function deliveries(stream, group, id)
  local p = redis.call('XPENDING', stream, group, id, id, 1)
  if p[1] then return p[1][4] end
  return 0
end
-- read: the fenced read of a keyed partition's owner.
--
-- Uses deliveries() from lib/pel.lua.
--
-- KEYS[1] lease
-- KEYS[2..] lanes in priority order (the partition stream, its backfill lane)
-- ARGV[1] token, also the consumer name
-- ARGV[2] group (the handler's name)
-- ARGV[3] how many new entries of the first lane to read at most (read
--         ahead; every other read takes one entry)
-- ARGV[4] the lane (1-based) of the entry to ack first, 0 for none
-- ARGV[5] the id of that entry
-- Returns {lane (1-based among the lanes), entries, deliveries of the
-- first entry, 1 when it came from the pending pass else 0, 1 when more
-- may be waiting (a full read, a pending entry, or a later lane exists)
-- else 0}, or {0} when
-- every lane is drained (the pending pass always runs: a caller cannot
-- know its consumer has nothing pending, since a read whose reply was
-- lost and was sent again by the client delivered an entry it never saw); the SEQBY_FENCED error when the lease does not hold
-- the token.
--
-- Two passes: first the consumer's own pending entries (id 0) on every
-- lane, then new entries ('>') lane by lane. A pending entry is one this
-- owner (or a predecessor, after the claim's reclaim) was handed and did
-- not ack: in flight at a crash, retried, or a halted head. It must run
-- again before anything else, even before a newer entry on an earlier lane
-- (a backfill head in flight when a primary entry arrived), or the
-- partition would apply that entry between two runs of the head. New
-- entries of a later lane are read only when earlier lanes have none. A
-- lane's group is created (from id 0) the first time a read finds it
-- missing, so a backfill lane may appear after the claim. Redis forbids
-- XREADGROUP BLOCK inside a script, so this never blocks.
--
-- Read ahead: new entries of the first lane come up to ARGV[3] at a time.
-- They are pending under this owner before they run, which keeps them in
-- order for a successor (its reclaim and pending pass hand them over
-- oldest first), and the owner acks each one, fenced, before it runs the
-- next, so the one-in-flight promise holds. Each counts one delivery when
-- read ahead, so one that an owner read ahead and never ran counts one
-- delivery more than the handlers it reached (at most one: only '>' reads
-- more than one entry). The pending pass reads one entry at a time, as
-- reading an entry from the pending list counts a delivery.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return redis.error_reply('SEQBY_FENCED lease ' .. KEYS[1] .. ' is not held by ' .. ARGV[1])
end
-- The previous entry's ack rides on this read: one script call per entry.
-- Acking after the fence check keeps it fenced, as ack.lua is.
local ack = tonumber(ARGV[4])
if ack and ack > 0 then redis.call('XACK', KEYS[ack + 1], ARGV[2], ARGV[5]) end
local function read(s, id, count)
  local r = redis.pcall('XREADGROUP', 'GROUP', ARGV[2], ARGV[1], 'COUNT', count, 'STREAMS', s, id)
  if type(r) == 'table' and r.err then
    -- NOGROUP: a lane that appeared after the claim gets its group now.
    redis.pcall('XGROUP', 'CREATE', s, ARGV[2], '0')
    r = redis.call('XREADGROUP', 'GROUP', ARGV[2], ARGV[1], 'COUNT', count, 'STREAMS', s, id)
  end
  return r
end
for _, id in ipairs({'0', '>'}) do
  for i = 2, #KEYS do
    if redis.call('EXISTS', KEYS[i]) == 1 then
      local count = 1
      if id == '>' and i == 2 then count = ARGV[3] end
      local r = read(KEYS[i], id, count)
      if r and r[1] and #r[1][2] > 0 then
        if id == '>' then
          -- Never delivered before in the group: this is the first
          -- entry's first time; the others are read ahead (see above).
          local es = r[1][2]
          local more = 0
          if #es >= tonumber(count) then more = 1 end
          for j = i + 1, #KEYS do
            if redis.call('EXISTS', KEYS[j]) == 1 then more = 1 end
          end
          return {i - 1, es, 1, 0, more}
        end
        return {i - 1, r[1][2], deliveries(KEYS[i], ARGV[2], r[1][2][1][1]), 1}
      end
    end
  end
end
return {0}
