-- resolve_head: the operator's compare-and-skip of a halted head, with an
-- optional copy to the dead-letter stream, in one atomic step.
--
-- KEYS[1] the lease's control hash (rdb.MetaKey): fields halt (the
--         record), attempt (begin_attempt.lua) and resolved (the note)
-- KEYS[2] the lane holding the head
-- KEYS[3] lease
-- KEYS[4 .. 3+m] the lease's other lanes (ARGV[8] is m)
-- KEYS[4+m] dead-letter stream (optional)
-- All share the partition's (or the pm value's) slot.
-- ARGV[1] record (JSON) as read
-- ARGV[2] token of the owner that halted
-- ARGV[3] the handler or pm
-- ARGV[4] entry id
-- ARGV[5] how long the resolved note lives, in milliseconds
-- ARGV[6] the command ("skip" or "dlq move"), for the resolved note
-- ARGV[7] the call's op (NewOp), for the resolved note
-- ARGV[8] m, the number of the lease's other lanes in KEYS
-- ARGV[9..] dead-letter metadata field/value pairs
--
-- Checks, in order:
--   - the halt record must still be the one the operator read (NOT_HALTED),
--   - the lease must be free or held by the owner that halted (RETRYING),
--   - and that owner must not be attempting the head now (ATTEMPTING: its
--     attempt mark holds the lease's token and has not expired),
--   - the entry must still be pending (STALE: the partition moved past it
--     and the record is stale),
--   - and be the group's first pending entry on the lane (NOT_HEAD, with
--     the actual first pending id); the group is the handler's on the
--     lane, whichever it is now (lib/head.lua).
-- Then: leave the resolved note for the halted owner (JSON: the token
-- the lease held, "" when it was free, the entry id, the command, the op,
-- the dead-letter entry id, at, when, and exp, its expiry, in Redis ms),
-- first, so that a user not allowed to
-- write it (an older ACL line without SET) fails before anything changed;
-- copy the entry (its fields, then the metadata) to the dead-letter stream
-- when given, XACK it, delete the lease so the halted owner's next renew
-- or attempt fails and a new owner continues after the head, park the
-- group of every lane of the lease (the head's and the others) when it is
-- a generation's (lib/groups.lua: the halted owner can neither ack nor
-- read there any more), and remove the record
-- and the attempt mark. Once the lease is deleted no
-- attempt of the head starts anywhere: every attempt of a halted head
-- begins with begin_attempt, which needs the lease, and the head is acked.
--
-- A resolve that Redis runs twice (its reply lost, then resent by go-redis
-- or a proxy) finds the record gone, which reads as NOT_HALTED. Before it
-- refuses, a run looks for its op in the resolved note: when the note is
-- this op's and has not expired, the first run resolved the head, and it
-- answers as that run did, with its dead-letter entry id. Another operator's resolve carries
-- another op and is refused.
-- Returns {"OK", the dead-letter entry id or ""} or {code, detail}.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local refused = head_refusal() -- lib/head.lua
if refused then
  local done = redis.call('HGET', KEYS[1], 'resolved')
  if done then
    local ok, n = pcall(cjson.decode, done)
    if ok and type(n) == 'table' and n.op == ARGV[7] and (tonumber(n.exp) or 0) > now then
      return {'OK', n.dlq_id or ''}
    end
  end
  return refused
end
-- parked(name) reports whether the handler's group name needs no
-- parking: none, the shared group (an earlier build's acquire), or one
-- parked already.
local function parked(name)
  return not name or name == ARGV[3] or name == ARGV[3] .. '@0'
end
-- The other lanes' moves are planned before the first write, so that a
-- read Redis refuses (an ACL without TYPE, say) fails before anything
-- changed. A lane whose groups cannot be read (none there; an earlier
-- ACL line without XINFO GROUPS, whose lanes are on the shared group) has
-- nothing to park, as head_group judges the head's lane.
local m = tonumber(ARGV[8]) or 0
local plans = {}
for i = 4, 3 + m do
  local gs = redis.pcall('XINFO', 'GROUPS', KEYS[i])
  if type(gs) == 'table' and not gs.err then
    local cur = group_of(KEYS[i], ARGV[3])
    if not parked(cur and cur.name) then
      plans[#plans + 1] = plan_move(KEYS[i], ARGV[3], ARGV[3] .. '@0', '0')
    end
  end
end
local note = {token = redis.call('GET', KEYS[3]) or '', entry_id = ARGV[4], command = ARGV[6], op = ARGV[7], dlq_id = '',
  at = now, exp = now + tonumber(ARGV[5])}
redis.call('HSET', KEYS[1], 'resolved', cjson.encode(note))
local dlq = KEYS[4 + m]
local dlqid = ''
if dlq then
  local args = {}
  local e = redis.call('XRANGE', KEYS[2], ARGV[4], ARGV[4])
  if #e > 0 then
    for _, v in ipairs(e[1][2]) do args[#args + 1] = v end
  end
  for i = 9, #ARGV do args[#args + 1] = ARGV[i] end
  dlqid = redis.call('XADD', dlq, '*', unpack(args))
  -- The copy's id goes in the note too, for a resend's answer.
  note.dlq_id = dlqid
  redis.call('HSET', KEYS[1], 'resolved', cjson.encode(note))
end
local g = head_group()
redis.call('XACK', KEYS[2], g, ARGV[4])
-- The head's lane is planned after its XACK: the move carries the
-- pending entries left.
if not parked(g) then
  apply_move(plan_move(KEYS[2], ARGV[3], ARGV[3] .. '@0', '0'), ARGV[2])
end
for _, p in ipairs(plans) do apply_move(p, ARGV[2]) end
redis.call('DEL', KEYS[3])
redis.call('HDEL', KEYS[1], 'attempt', 'halt')
return {'OK', dlqid}
