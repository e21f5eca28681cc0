-- round: the fenced acks and reads of many partitions in one call, so the
-- cost of invoking a script (most of a fenced read's Redis time) is paid
-- once per round instead of once per partition. Each partition is a
-- slice with its own lease, token and lanes; slices share nothing but
-- the call.
--
-- Uses read_lanes() from lib/read.lua and read_oldest_lanes() from
-- lib/oldest.lua (the reads of read.lua and read_oldest.lua themselves),
-- which use lib/ids.lua and lib/pel.lua.
--
-- ARGV[1] S, the number of slices
-- ARGV[2] U, how many of the slices' keys are passed at the end of ARGV
--         instead of in KEYS (0 on a single Redis; see Cluster below)
-- then, per slice, a header of 7 values and its ack ids:
--   op       A (ack only), R (ack, then read.lua's read), O (ack, then
--            read_oldest.lua's read) or V (verify the lease only)
--   nkeys    how many keys the slice has: its lease, then its lanes
--   token    the token the lease must hold, also the consumer name
--   group    the consumer group
--   n        R: how many new entries of the first lane to read at most;
--            O: the number of primary lanes; else ignored
--   ackLane  the lane (1-based among the slice's lanes) the ack ids are
--            on, 0 for none
--   ackCount how many ack ids follow
--   ids...   ackCount entry ids, acked in one XACK, in this order
-- then the U undeclared keys.
-- The keys, KEYS then the U undeclared ones, are per slice, in slice
-- order, its nkeys keys (lease, lanes...).
--
-- Cluster: Redis refuses a call whose KEYS hash to several slots
-- (CROSSSLOT), even with the allow-cross-slot-keys flag, which only lets
-- the script touch keys of other slots of its node that it did not
-- declare. So on a cluster the first slice's keys (one slot) are declared,
-- which routes the call to their node and lets Redis refuse it whole
-- (MOVED, ASK, TRYAGAIN) while that slot is elsewhere or moving, and the
-- other slices' keys come undeclared, run by the variant of this script
-- whose first line sets the flag. A slice with undeclared keys first
-- touches all of them at once (EXISTS): Redis refuses a key that is not
-- on this node (another node's slot, or a key already migrated out of a
-- moving slot) before the slice does anything, and the slice replies
-- {-2, msg}.
--
-- Returns one element per slice, in slice order:
--   {1, reply}  the lease held the token: reply is XACK's count for A,
--               1 for V, and exactly read.lua's (R) or read_oldest.lua's
--               (O) reply for the same state;
--   {0}         fenced: the lease does not hold the token; nothing of
--               the slice was done;
--   {-1, msg}   the slice failed (a key of the wrong type, say). Redis
--               does not roll back a script: what the slice did before
--               the error (its acks) stays done, as it would in the
--               single scripts. Other slices are not affected;
--   {-2, msg}   the slice's keys are not all on this node: nothing of
--               the slice was done; send it again to the node that now
--               serves its slot.
-- A malformed call (the header does not match KEYS and ARGV) is refused
-- whole, with an error, before any slice runs.
local S, U = tonumber(ARGV[1]), tonumber(ARGV[2])
if not S or S < 0 or not U or U < 0 or U > #ARGV - 2 then
  return redis.error_reply('ERR round: ARGV[1..2] are not a slice and a key count')
end
local nargv = #ARGV - U
-- key(i) is the slice keys' i-th, declared or not.
local function key(i)
  if i <= #KEYS then return KEYS[i] end
  return ARGV[nargv + i - #KEYS]
end
-- Parse every header first, so a malformed call changes nothing.
local slices = {}
local a, k = 3, 1
for s = 1, S do
  local op, nk, lane, nack = ARGV[a], tonumber(ARGV[a + 1]), tonumber(ARGV[a + 5]), tonumber(ARGV[a + 6])
  if not (op == 'A' or op == 'R' or op == 'O' or op == 'V') or not nk or nk < 1 or
      not lane or lane < 0 or lane > nk - 1 or not nack or nack < 0 then
    return redis.error_reply('ERR round: malformed header of slice ' .. s)
  end
  slices[s] = {op, k, nk, a, lane, nack}
  a, k = a + 7 + nack, k + nk
end
if a - 1 ~= nargv or k - 1 ~= #KEYS + U then
  return redis.error_reply('ERR round: the slices name ' .. (k - 1) .. ' keys and ' .. (a - 1) ..
    ' arguments, the call has ' .. (#KEYS + U) .. ' and ' .. nargv)
end
-- slice runs one slice: the fence, as in the single scripts; then its
-- acks; then its read.
local function slice(op, k, nk, a, lane, nack)
  local token, group = ARGV[a + 2], ARGV[a + 3]
  if redis.call('GET', key(k)) ~= token then return {0} end
  local lanes = {}
  for i = 1, nk - 1 do lanes[i] = key(k + i) end
  -- One XACK for every id: it checks all the ids before acking any.
  local acked = 0
  if lane > 0 and nack > 0 then
    acked = redis.call('XACK', lanes[lane], group, unpack(ARGV, a + 7, a + 6 + nack))
  end
  if op == 'R' then return {1, read_lanes(lanes, token, group, ARGV[a + 4])} end
  if op == 'O' then return {1, read_oldest_lanes(lanes, token, group, tonumber(ARGV[a + 4]))} end
  if op == 'A' then return {1, acked} end
  return {1, 1}
end
-- caught is the reply of an error a slice raised: redis.call raises a
-- table with the error reply in err, Lua itself raises a string.
local function caught(status, r)
  if type(r) == 'table' and r.err then return {status, r.err} end
  return {status, tostring(r)}
end
local out = {}
for s = 1, S do
  local sl = slices[s]
  local ok, r = true, nil
  if sl[2] + sl[3] - 1 > #KEYS then
    -- Undeclared keys: Redis checked none of them. Touching them all in
    -- one command either finds them all here or changes nothing.
    local ks = {}
    for i = 1, sl[3] do ks[i] = key(sl[2] + i - 1) end
    ok, r = pcall(redis.call, 'EXISTS', unpack(ks))
    if not ok then out[s] = caught(-2, r) end
  end
  if ok then
    ok, r = pcall(slice, unpack(sl))
    if ok then out[s] = r else out[s] = caught(-1, r) end
  end
end
return out
