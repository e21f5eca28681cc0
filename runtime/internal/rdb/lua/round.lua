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
-- then, per slice, a header of 8 values and its ack ids:
--   op       A (ack only), R (ack, then read.lua's read), N (ack, then
--            read only the entries of the first lane after those the
--            owner holds, no pending pass: lib/read.lua's read_new), O
--            (ack, then read_oldest.lua's read) or V (verify the lease
--            only)
--   nkeys    how many keys the slice has: its lease, its control hash
--            (rdb.MetaKey of the lease: field paused), then its lanes
--   token    the token the lease must hold, also the consumer name
--   group    the consumer group
--   n        R, N: how many new entries of the first lane to read at most;
--            O: the number of primary lanes; else ignored
--   ackLane  the lane (1-based among the slice's lanes) the ack ids are
--            on, 0 for none
--   ackCount how many ack ids follow
--   after    N: the id of the last entry of the first lane the owner holds
--            (read, not acked and not acked by this call), 0 when it
--            holds none there, so that the call run again hands back the
--            entries its first run delivered (lib/read.lua's read_new);
--            else empty
--   ids...   ackCount entry ids, acked in one XACK, in this order
-- then the U undeclared keys.
-- The keys, KEYS then the U undeclared ones, are per slice, in slice
-- order, its nkeys keys (lease, pause mark, lanes...).
--
-- Cluster: Redis refuses a call whose KEYS hash to several slots
-- (CROSSSLOT), even with the allow-cross-slot-keys flag, which only lets
-- the script touch keys of other slots of its node that it did not
-- declare. So on a cluster the first slice's keys (one slot) are declared,
-- which routes the call to their node and lets Redis refuse it whole
-- (MOVED, ASK, TRYAGAIN) while that slot is elsewhere or moving, and the
-- other slices' keys come undeclared, run by the variant of this script
-- whose first line sets the flag (and allow-oom, so that at maxmemory the
-- call runs as the unflagged single scripts do). A slice with undeclared
-- keys first probes them (EXISTS, which changes nothing): Redis refuses
-- a key that is not served here now (another node's slot; a key missing
-- in a slot migrating out, as it may have left; with ASKING, a command of
-- several keys, some missing, in a slot importing here) before the slice
-- does anything, and the slice replies {-2, msg}. Inside a script Redis
-- 7.0.15 words all of these "ERR Script attempted to access a non local
-- key in a cluster node" (and a down cluster "ERR Script attempted to
-- execute a command while the cluster is down"); any other refusal of
-- the probe (an ACL one, "ERR The user executing the script can't access
-- at least one of the keys mentioned in the command arguments") is the
-- slice's failure, {-1, msg}. A slice's keys must share a slot
-- (BuildRound checks it), as Redis words a probe across slots the same
-- non local key way. A key that is merely missing (a backfill lane not
-- created yet) in a slot that is migrating makes the slice reply {-2}
-- until the migration ends, though it may be served here: liveness only,
-- the caller backs off and sends it again. The same holds for the first
-- slice, whose keys are declared: Redis refuses the call whole (TRYAGAIN)
-- while one of them is missing in a slot importing here, and a control
-- hash is missing until the lease's first acquire.
--
-- Returns one element per slice, in slice order:
--   {1, reply}  the lease held the token: reply is XACK's count for A,
--               1 for V, exactly read.lua's (R) or read_oldest.lua's (O)
--               reply for the same state, and for N read.lua's reply to a
--               read whose pending pass found nothing when the first lane
--               has new entries, else {0} (later lanes not looked at);
--   {0}         fenced: the lease does not hold the token; nothing of
--               the slice was done;
--   {2, acked}  the lease held the token and an operator paused the
--               partition (its control hash has a paused field): the acks were done
--               (acked is XACK's count), nothing was read, and the lease
--               is not confirmed for an attempt, whatever the op (the
--               single scripts' SEQBY_PAUSED error);
--   {-1, msg}   the slice failed (a key of the wrong type, say; msg is
--               Redis's error reply, or a Lua error prefixed "ERR ", as
--               the single script would reply). Redis does not roll back
--               a script: what the slice did before the error (its acks)
--               stays done, as it would in the single scripts. Other
--               slices are not affected;
--   {-2, msg}   the slice's keys are not all served by this node now:
--               nothing of the slice was done; send it again to the node
--               that now serves its slot.
-- A malformed call (ARGV[1..2] or a header that is not as above, or
-- headers that do not match KEYS and ARGV) is refused whole, with an
-- error, before any slice runs: nothing of it is done.
-- count is a header value that is a whole number written in decimal
-- digits, else nil (tonumber alone takes 1.5, 0x1, ' 1' and 1e3).
local function count(v)
  if type(v) == 'string' and string.match(v, '^%d+$') then return tonumber(v) end
  return nil
end
local S, U = count(ARGV[1]), count(ARGV[2])
if not S or not U or U > #ARGV - 2 then
  return redis.error_reply('ERR round: ARGV[1..2] are not a slice and a key count')
end
local nargv = #ARGV - U
-- key(i) is the slice keys' i-th, declared or not.
local function key(i)
  if i <= #KEYS then return KEYS[i] end
  return ARGV[nargv + i - #KEYS]
end
-- Parse every header first, so a malformed call changes nothing. The
-- header is refused where BuildRound refuses the slice: an unknown op;
-- counts that are not whole numbers; an ack lane beyond the lanes; ack
-- ids without an ack lane or an ack lane without ids; a verify that acks;
-- a read (R, N) of fewer than one entry or of no lane; more primaries than
-- lanes; a read-new (N) without the id it reads after, or another op with
-- one.
local slices = {}
local a, k = 3, 1
for s = 1, S do
  local op, nk, n, lane, nack = ARGV[a], count(ARGV[a + 1]), count(ARGV[a + 4]), count(ARGV[a + 5]), count(ARGV[a + 6])
  if not (op == 'A' or op == 'R' or op == 'N' or op == 'O' or op == 'V') or not nk or nk < 2 or
      not lane or lane > nk - 2 or not nack or (lane == 0) ~= (nack == 0) or
      (op == 'V' and nack > 0) or ((op == 'R' or op == 'N') and (not n or n < 1 or nk < 3)) or
      (op == 'O' and (not n or n > nk - 2)) or ((op == 'N') ~= (ARGV[a + 7] ~= '')) then
    return redis.error_reply('ERR round: malformed header of slice ' .. s)
  end
  slices[s] = {op, k, nk, a, lane, nack}
  a, k = a + 8 + nack, k + nk
end
if a - 1 ~= nargv or k - 1 ~= #KEYS + U then
  return redis.error_reply('ERR round: the slices name ' .. (k - 1) .. ' keys and ' .. (a - 1) ..
    ' arguments, the call has ' .. (#KEYS + U) .. ' and ' .. nargv)
end
-- slice runs one slice: the fence, as in the single scripts; then its
-- acks; then the pause; then its read.
local function slice(op, k, nk, a, lane, nack)
  local token, group = ARGV[a + 2], ARGV[a + 3]
  if redis.call('GET', key(k)) ~= token then return {0} end
  local lanes = {}
  for i = 1, nk - 2 do lanes[i] = key(k + 1 + i) end
  -- One XACK for every id: it checks all the ids before acking any.
  local acked = 0
  if lane > 0 and nack > 0 then
    acked = redis.call('XACK', lanes[lane], group, unpack(ARGV, a + 8, a + 7 + nack))
  end
  -- The entry the acks are for has finished; no other starts on a paused
  -- partition. An ack alone confirms the lease for the next entry too.
  if redis.call('HGET', key(k + 1), 'paused') then return {2, acked} end
  if op == 'R' then return {1, read_lanes(lanes, token, group, ARGV[a + 4])} end
  if op == 'N' then return {1, read_new(lanes, token, group, ARGV[a + 4], ARGV[a + 7])} end
  if op == 'O' then return {1, read_oldest_lanes(lanes, token, group, tonumber(ARGV[a + 4]))} end
  if op == 'A' then return {1, acked} end
  return {1, 1}
end
-- caught is the reply of an error a slice raised. A redis.call error
-- comes to pcall as its reply text, beginning with its code (ERR,
-- WRONGTYPE, NOGROUP...: a string, as measured on 7.0.15; read from err
-- should a version raise a table); a Lua error is a string such as "user_script:12: too many
-- results to unpack", which gets the ERR prefix a script's Lua error has
-- in the single scripts' reply, so the caller classifies both alike.
local function caught(status, r)
  if type(r) == 'table' and r.err then r = r.err end
  r = tostring(r)
  if not string.match(r, '^%u[%u_-]* ') then r = 'ERR ' .. r end
  return {status, r}
end
-- moving reports an error raised by touching keys that means "not served
-- by this node now" (another node's slot, a slot migrating or importing,
-- the cluster down), as Redis 7.0 words it inside a script; or, should
-- a Redis raise them there, its own redirections. Anything else (an ACL
-- refusal, say) is the slice's failure.
local function moving(r)
  local msg = r
  if type(r) == 'table' then msg = r.err end
  msg = tostring(msg)
  return string.find(msg, 'Script attempted to access a non local key', 1, true) ~= nil or
      string.find(msg, 'while the cluster is down', 1, true) ~= nil or
      string.match(msg, '^MOVED ') ~= nil or string.match(msg, '^ASK ') ~= nil or
      string.match(msg, '^TRYAGAIN') ~= nil or string.match(msg, '^CLUSTERDOWN') ~= nil
end
-- companion is a key of the same slot as key that differs from it: key
-- with a suffix when key has a hash tag, else key as the tag. nil when
-- neither keeps the slot (a '}' in a key without a tag).
local function companion(key)
  local i = string.find(key, '{', 1, true)
  if i then
    local j = string.find(key, '}', i + 1, true)
    if j and j > i + 1 then return key .. ':__round_probe__' end
  end
  if not string.find(key, '}', 1, true) then return '{' .. key .. '}' end
  return nil
end
-- probe touches an undeclared slice's keys (EXISTS: it changes nothing)
-- and returns nil when they are all served here, else the error.
local function probe(ks)
  local ok, r = pcall(redis.call, 'EXISTS', unpack(ks))
  if not ok then return r end
  if r < #ks then
    -- A key is missing. On the node a slot is migrating from, Redis
    -- refused that already (the key may have left). On the node it is
    -- importing to, when the call came with ASKING (go-redis followed an
    -- ASK for the first slice), Redis serves a missing key as if it were
    -- here, though it may still be on the source: a lease read as
    -- missing there would fence a slice whose lease is held. Touching
    -- the keys again with another key of their slot makes it a command
    -- of several keys, some missing, which Redis refuses (TRYAGAIN,
    -- reported as a non local key) in an importing or migrating slot and
    -- serves in a stable one.
    local c = companion(ks[1])
    if c then
      local ks2 = {c}
      for i = 1, #ks do ks2[i + 1] = ks[i] end
      ok, r = pcall(redis.call, 'EXISTS', unpack(ks2))
      if not ok then return r end
    end
  end
  return nil
end
local out = {}
for s = 1, S do
  local sl = slices[s]
  local ok, r = true, nil
  if sl[2] + sl[3] - 1 > #KEYS then
    -- Undeclared keys: Redis checked none of them. Probing them changes
    -- nothing, so a slice refused here did nothing at all.
    local ks = {}
    for i = 1, sl[3] do ks[i] = key(sl[2] + i - 1) end
    local e = probe(ks)
    if e then
      ok = false
      if moving(e) then out[s] = caught(-2, e) else out[s] = caught(-1, e) end
    end
  end
  if ok then
    ok, r = pcall(slice, unpack(sl))
    if ok then out[s] = r else out[s] = caught(-1, r) end
  end
end
return out
