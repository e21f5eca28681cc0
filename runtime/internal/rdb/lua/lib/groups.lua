-- groups: a handler's consumer group on a lane, and its moves from one
-- lease generation to the next, prepended to the scripts that take, end
-- or move a lease (docs/runtime.md, "Consumer groups").
--
-- On each lane, a keyed handler or sequential pm h has at most one group:
-- h@<generation>, read by the owner of that lease generation only; h@0,
-- parking the lane while no lease reads it; or h, the earlier layout's
-- shared group (and retention's, on a lane h never read). A stale owner's
-- group is gone once another owner's exists: its XACK acks nothing and its
-- XREADGROUP fails with NOGROUP. That is the fence of the plain commands.
--
-- A move carries the group whole to a new name: the new group starts at
-- the old one's last-delivered id (and entries-read, so Redis keeps
-- reporting lag), every pending entry of the old one is claimed into it
-- with its delivery count (XCLAIM FORCE RETRYCOUNT JUSTID, which counts
-- nothing), and the old one is destroyed. So the pending entries, their
-- order across lanes, their delivery counts and the position are what the
-- shared group kept across owners; only who may ack changed. An entry
-- deleted from the stream while pending is not carried (XCLAIM skips it):
-- the handler never saw its body.

-- group_of(lane, h) reads h's groups on lane: the current one (the
-- highest generation's h@n, else h) as a table {name, last, read,
-- pending}, or nil; and the names of the others (an h beside an h@n, made
-- by an earlier build's retention, or a second h@n), which are junk.
-- read is the group's entries-read, nil when Redis does not know it.
local function group_of(lane, h)
  local cur, curgen, junk = nil, -1, {}
  local prefix = h .. '@'
  for _, g in ipairs(redis.call('XINFO', 'GROUPS', lane)) do
    local f = {}
    for j = 1, #g, 2 do f[g[j]] = g[j + 1] end
    local name, gen = f['name'], nil
    if name == h then
      gen = -0.5
    elseif string.sub(name, 1, #prefix) == prefix and string.match(string.sub(name, #prefix + 1), '^%d+$') then
      gen = tonumber(string.sub(name, #prefix + 1))
    end
    if gen then
      local this = {name = name, last = f['last-delivered-id'], read = f['entries-read'], pending = f['pending']}
      if gen > curgen then
        if cur then junk[#junk + 1] = cur.name end
        cur, curgen = this, gen
      else
        junk[#junk + 1] = name
      end
    end
  end
  if cur and type(cur.read) ~= 'number' then cur.read = nil end
  return cur, junk
end

-- plan_move(lane, h, to, start) plans the move of h's group on lane to
-- the group named to: nil when the lane is not a stream, else a table for
-- apply_move. A lane with no group of h gets to at start (an id). Nothing
-- is written: every lane's plan is made before any move is applied, so a
-- refusal in between changes nothing.
local function plan_move(lane, h, to, start)
  if redis.call('TYPE', lane)['ok'] ~= 'stream' then return nil end
  local cur, junk = group_of(lane, h)
  local p = {lane = lane, to = to, junk = junk, pending = {}}
  if not cur then
    p.last = start
    return p
  end
  if cur.name == to then
    p.done = true
    return p
  end
  p.from, p.last, p.read = cur.name, cur.last, cur.read
  if cur.pending > 0 then
    p.pending = redis.call('XPENDING', lane, cur.name, '-', '+', cur.pending)
  end
  return p
end

-- apply_move(p, consumer, giveback) applies a plan: to is created at the
-- position, the pending entries are claimed for consumer with their
-- delivery counts and idle times (a count one less for an entry of
-- giveback[lane][id]: one its owner was handed and is handing on unrun),
-- the old group and the junk are destroyed. A plan of a move already made
-- destroys only junk.
local function apply_move(p, consumer, giveback)
  if not p then return end
  for _, name in ipairs(p.junk) do redis.call('XGROUP', 'DESTROY', p.lane, name) end
  if p.done then return end
  if p.read then
    redis.call('XGROUP', 'CREATE', p.lane, p.to, p.last, 'ENTRIESREAD', math.max(p.read, 0))
  else
    redis.call('XGROUP', 'CREATE', p.lane, p.to, p.last)
  end
  local back = giveback and giveback[p.lane] or {}
  for _, e in ipairs(p.pending) do
    local n = e[4]
    if back[e[1]] then n = math.max(n - 1, 0) end
    redis.call('XCLAIM', p.lane, p.to, consumer, 0, e[1], 'IDLE', e[3], 'FORCE', 'RETRYCOUNT', n, 'JUSTID')
  end
  if p.from then redis.call('XGROUP', 'DESTROY', p.lane, p.from) end
end

-- join(lane, group, consumer, raise) gives lane, a stream, its group
-- named group for a fenced read where it has none: a lease generation's
-- (h@n) takes over the lane's group of h whole, as the acquire's move
-- does (a lane made after the lease was taken, where retention may have
-- made h); another group (the earlier layout's shared one) is created at
-- 0, a refusal (BUSYGROUP: it exists) ignored unless raise. It returns
-- how many pending entries the group took over.
local function join(lane, group, consumer, raise)
  local h = string.match(group, '^(.*)@%d+$')
  if not h then
    if raise then
      redis.call('XGROUP', 'CREATE', lane, group, '0')
    else
      redis.pcall('XGROUP', 'CREATE', lane, group, '0')
    end
    return 0
  end
  local p = plan_move(lane, h, group, '0')
  apply_move(p, consumer)
  return p and #p.pending or 0
end
