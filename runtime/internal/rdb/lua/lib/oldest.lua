-- oldest: the body of a process manager owner's fenced read, which reads
-- every stream of its correlation value and applies the oldest entry
-- first; prepended to read_oldest.lua and round.lua so that a read
-- carried in a round is the very same read. The caller checks the fence
-- and applies its ack first. Uses older() from lib/ids.lua and
-- deliveries() from lib/pel.lua.
--
-- read_oldest_lanes(lanes, token, group, np) reads for the consumer token
-- in group over lanes, the np primary streams first, then the backfill
-- lanes. It returns {lane (1-based among the lanes), {entry}, its
-- deliveries}, or {0} when every lane is drained.
--
-- First the owner's own pending entries: only an entry this read
-- returned and nobody acked is pending (in flight at a crash, retried, a
-- halted head), and it must run again before anything new: the oldest
-- pending head of the primary lanes, else of the backfill lanes. Else each
-- lane's next new entry is peeked (XRANGE after the group's
-- last-delivered-id) without delivering it, and only the oldest is
-- delivered (XREADGROUP '>'): the oldest of the primary lanes, or of the
-- backfill lanes when every primary lane is drained. Peeking keeps entries
-- that were looked at but not chosen out of the pending list, so a pending
-- entry always means "returned and not acked". Redis runs Lua 5.1: no
-- goto, so loops nest.
local function oldest_pending(s, token, group)
  local r = redis.pcall('XREADGROUP', 'GROUP', group, token, 'COUNT', 1, 'STREAMS', s, '0')
  if type(r) == 'table' and r.err then
    -- NOGROUP: a lane that appeared after the claim gets its group now
    -- (join() from lib/groups.lua), with what the lane's group of the pm
    -- held pending, if any.
    if join(s, group, token) == 0 then return nil end
    r = redis.call('XREADGROUP', 'GROUP', group, token, 'COUNT', 1, 'STREAMS', s, '0')
  end
  if r and r[1] and #r[1][2] > 0 then return r[1][2][1] end
  return nil
end
-- last_delivered is group's last-delivered id on s, nil without it.
local function last_delivered(s, group)
  for _, g in ipairs(redis.call('XINFO', 'GROUPS', s)) do
    local name, id
    for j = 1, #g, 2 do
      if g[j] == 'name' then name = g[j + 1] end
      if g[j] == 'last-delivered-id' then id = g[j + 1] end
    end
    if name == group then return id end
  end
  return nil
end
local function oldest_peek(s, token, group)
  local last = last_delivered(s, group)
  if not last then
    join(s, group, token, true)
    last = last_delivered(s, group) or '0-0'
  end
  local r = redis.call('XRANGE', s, '(' .. last, '+', 'COUNT', 1)
  return r[1]
end
local function oldest_pick(lanes, from, to, get, token, group)
  local best, at
  for i = from, to do
    if redis.call('EXISTS', lanes[i]) == 1 then
      local e = get(lanes[i], token, group)
      if e and (not best or older(e[1], best[1])) then best, at = e, i end
    end
  end
  return best, at
end
local function read_oldest_lanes(lanes, token, group, np)
  local e, at = oldest_pick(lanes, 1, np, oldest_pending, token, group)
  if not e then e, at = oldest_pick(lanes, np + 1, #lanes, oldest_pending, token, group) end
  if e then return {at, {e}, deliveries(lanes[at], group, e[1])} end
  e, at = oldest_pick(lanes, 1, np, oldest_peek, token, group)
  if not e then e, at = oldest_pick(lanes, np + 1, #lanes, oldest_peek, token, group) end
  if not e then return {0} end
  local r = redis.call('XREADGROUP', 'GROUP', group, token, 'COUNT', 1, 'STREAMS', lanes[at], '>')
  return {at, r[1][2], deliveries(lanes[at], group, r[1][2][1][1])}
end
