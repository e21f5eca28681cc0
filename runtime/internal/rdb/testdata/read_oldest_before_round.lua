-- ids: stream entry id helpers, prepended to the scripts that compare ids
-- (a script cannot load another).
local function older(a, b)
  local ams, aseq = string.match(a, '^(%d+)-(%d+)$')
  local bms, bseq = string.match(b, '^(%d+)-(%d+)$')
  ams, bms = tonumber(ams), tonumber(bms)
  if ams ~= bms then return ams < bms end
  return tonumber(aseq) < tonumber(bseq)
end
-- pel: pending-entries-list helpers, prepended to the scripts that use
-- them.

-- deliveries(stream, group, id) is how many times the entry was delivered
-- in group (XREADGROUP and XCLAIM count), 0 when it is not pending.
local function deliveries(stream, group, id)
  local p = redis.call('XPENDING', stream, group, id, id, 1)
  if p[1] then return p[1][4] end
  return 0
end
-- read_oldest: the fenced read of a process manager's owner, which reads
-- every stream of its correlation value and applies the oldest entry first.
--
-- Uses older() from lib/ids.lua and deliveries() from lib/pel.lua.
--
-- KEYS[1] lease
-- KEYS[2..] lanes: the primary streams first (ARGV[3] of them), then the
--           backfill lanes
-- ARGV[1] token, also the consumer name
-- ARGV[2] group (the pm's name)
-- ARGV[3] number of primary lanes
-- ARGV[4] the lane (1-based) of the entry to ack first, 0 for none
-- ARGV[5] the id of that entry
-- Returns {lane (1-based among the lanes), {entry}, its deliveries}, or {0} when every lane
-- is drained; the SEQBY_FENCED error when the lease does not hold the token.
--
-- First the owner's own pending entries: only an entry this script
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
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return redis.error_reply('SEQBY_FENCED lease ' .. KEYS[1] .. ' is not held by ' .. ARGV[1])
end
-- The previous entry's ack rides on this read: one script call per entry.
-- Acking after the fence check keeps it fenced, as ack.lua is.
local ack = tonumber(ARGV[4])
if ack and ack > 0 then redis.call('XACK', KEYS[ack + 1], ARGV[2], ARGV[5]) end
local function pending(s)
  local r = redis.pcall('XREADGROUP', 'GROUP', ARGV[2], ARGV[1], 'COUNT', 1, 'STREAMS', s, '0')
  if type(r) == 'table' and r.err then
    -- NOGROUP: a lane that appeared after the claim; nothing is pending.
    redis.pcall('XGROUP', 'CREATE', s, ARGV[2], '0')
    return nil
  end
  if r and r[1] and #r[1][2] > 0 then return r[1][2][1] end
  return nil
end
local function peek(s)
  local last
  for _, g in ipairs(redis.call('XINFO', 'GROUPS', s)) do
    local name, id
    for j = 1, #g, 2 do
      if g[j] == 'name' then name = g[j + 1] end
      if g[j] == 'last-delivered-id' then id = g[j + 1] end
    end
    if name == ARGV[2] then last = id end
  end
  if not last then
    redis.call('XGROUP', 'CREATE', s, ARGV[2], '0')
    last = '0-0'
  end
  local r = redis.call('XRANGE', s, '(' .. last, '+', 'COUNT', 1)
  return r[1]
end
local function pick(from, to, get)
  local best, at
  for i = from, to do
    if redis.call('EXISTS', KEYS[i]) == 1 then
      local e = get(KEYS[i])
      if e and (not best or older(e[1], best[1])) then best, at = e, i end
    end
  end
  return best, at
end
local np = tonumber(ARGV[3])
local e, at = pick(2, 1 + np, pending)
if not e then e, at = pick(2 + np, #KEYS, pending) end
if e then return {at - 1, {e}, deliveries(KEYS[at], ARGV[2], e[1])} end
e, at = pick(2, 1 + np, peek)
if not e then e, at = pick(2 + np, #KEYS, peek) end
if not e then return {0} end
local r = redis.call('XREADGROUP', 'GROUP', ARGV[2], ARGV[1], 'COUNT', 1, 'STREAMS', KEYS[at], '>')
return {at - 1, r[1][2], deliveries(KEYS[at], ARGV[2], r[1][2][1][1])}
