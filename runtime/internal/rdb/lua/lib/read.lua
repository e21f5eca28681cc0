-- read: the body of a keyed partition owner's fenced read, prepended to
-- read.lua and round.lua so that a read carried in a round is the very
-- same read, not a copy of it. The caller checks the fence and applies
-- its ack first. Uses deliveries() from lib/pel.lua.
--
-- read_lanes(lanes, token, group, count) reads for the consumer token in
-- group over lanes (priority order: the partition stream, its backfill
-- lane), count new entries of the first lane at most (a string or a
-- number). It returns {lane (1-based among the lanes), entries,
-- deliveries of the first entry, 1 when it came from the pending pass else
-- 0, 1 when more may be waiting (a full read, a pending entry, or a later
-- lane exists) else 0}, or {0} when every lane is drained (the pending
-- pass always runs: a caller cannot know its consumer has nothing
-- pending, since a read whose reply was lost and was sent again by the
-- client delivered an entry it never saw).
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
-- Read ahead: new entries of the first lane come up to count at a time.
-- They are pending under this owner before they run, which keeps them in
-- order for a successor (its reclaim and pending pass hand them over
-- oldest first), and the owner acks each one, fenced, before it runs the
-- next, so the one-in-flight promise holds. Each counts one delivery when
-- read ahead, so one that an owner read ahead and never ran counts one
-- delivery more than the handlers it reached (at most one: only '>' reads
-- more than one entry). The pending pass reads one entry at a time, as
-- reading an entry from the pending list counts a delivery.
local function read_lane(s, token, group, id, count)
  local r = redis.pcall('XREADGROUP', 'GROUP', group, token, 'COUNT', count, 'STREAMS', s, id)
  if type(r) == 'table' and r.err then
    -- NOGROUP: a lane that appeared after the claim gets its group now
    -- (join() from lib/groups.lua).
    join(s, group, token)
    r = redis.call('XREADGROUP', 'GROUP', group, token, 'COUNT', count, 'STREAMS', s, id)
  end
  return r
end
local function read_lanes(lanes, token, group, count)
  for _, id in ipairs({'0', '>'}) do
    for i = 1, #lanes do
      if redis.call('EXISTS', lanes[i]) == 1 then
        local n = 1
        if id == '>' and i == 1 then n = count end
        local r = read_lane(lanes[i], token, group, id, n)
        if r and r[1] and #r[1][2] > 0 then
          if id == '>' then
            -- Never delivered before in the group: this is the first
            -- entry's first time; the others are read ahead (see above).
            local es = r[1][2]
            local more = 0
            if #es >= tonumber(n) then more = 1 end
            for j = i + 1, #lanes do
              if redis.call('EXISTS', lanes[j]) == 1 then more = 1 end
            end
            return {i, es, 1, 0, more}
          end
          return {i, r[1][2], deliveries(lanes[i], group, r[1][2][1][1]), 1}
        end
      end
    end
  end
  return {0}
end
-- read_new(lanes, token, group, count, after) reads up to count new
-- entries ('>') of the first lane only, without the pending pass: a read
-- sent ahead of need (round.lua's N op) by an owner that holds entries it
-- read and has not acked, which a pending pass would hand it again. after
-- is the id of the last entry of the first lane the owner holds.
--
-- A client may run the call twice (go-redis resends a call whose reply it
-- lost; a proxy replays one), and the second run must hand back what the
-- first delivered, not the entries after them, which the owner would run
-- first: so this consumer's pending entries of the first lane after
-- `after`, which only a run whose reply was lost can have delivered, come
-- back before anything new is read. They are listed (XPENDING) and read
-- (XRANGE), which counts no delivery, so the reply is the first run's.
--
-- Its reply is read_lanes()'s for a '>' read of the first lane: {1,
-- entries, 1, 0, more}, more being 1 on a full read or when a later lane
-- exists; or {0} when the first lane has nothing new, which, unlike
-- read_lanes()'s, says nothing of the later lanes.
local function delivered_after(lane, group, token, after, count)
  local p = redis.pcall('XPENDING', lane, group, '(' .. after, '+', count, token)
  if type(p) ~= 'table' or p.err or #p == 0 then return nil end
  local es = {}
  for i = 1, #p do
    local e = redis.call('XRANGE', lane, p[i][1], p[i][1])
    -- An entry deleted while pending reads as a read of it would: no body.
    es[i] = e[1] or {p[i][1], false}
  end
  return es
end
local function read_new(lanes, token, group, count, after)
  if redis.call('EXISTS', lanes[1]) == 0 then return {0} end
  local es = delivered_after(lanes[1], group, token, after, count)
  if not es then
    local r = read_lane(lanes[1], token, group, '>', count)
    if not (r and r[1] and #r[1][2] > 0) then return {0} end
    es = r[1][2]
  end
  local more = 0
  if #es >= tonumber(count) then more = 1 end
  for j = 2, #lanes do
    if redis.call('EXISTS', lanes[j]) == 1 then more = 1 end
  end
  return {1, es, 1, 0, more}
end
