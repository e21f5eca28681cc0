-- resolve_head: the operator's compare-and-skip of a halted head, with an
-- optional copy to the dead-letter stream, in one atomic step.
--
-- KEYS[1] the halt record
-- KEYS[2] the lane holding the head
-- KEYS[3] lease
-- KEYS[4] the lease's attempt mark (begin_attempt.lua)
-- KEYS[5] the lease's resolved note (ResolvedKey)
-- KEYS[6] dead-letter stream (optional)
-- All share the partition's (or the pm value's) slot.
-- ARGV[1] record (JSON) as read
-- ARGV[2] token of the owner that halted
-- ARGV[3] group
-- ARGV[4] entry id
-- ARGV[5] how long the resolved note lives, in milliseconds
-- ARGV[6] the command ("skip" or "dlq move"), for the resolved note
-- ARGV[7] the call's op (NewOp), for the resolved note
-- ARGV[8..] dead-letter metadata field/value pairs
--
-- Checks, in order:
--   - the halt record must still be the one the operator read (NOT_HALTED),
--   - the lease must be free or held by the owner that halted (RETRYING),
--   - and that owner must not be attempting the head now (ATTEMPTING: its
--     attempt mark holds the lease's token),
--   - the entry must still be pending (STALE: the partition moved past it
--     and the record is stale),
--   - and be the group's first pending entry on the lane (NOT_HEAD, with
--     the actual first pending id).
-- Then: leave the resolved note for the halted owner (JSON: the token
-- the lease held, "" when it was free, the entry id, the command, the op
-- and the dead-letter entry id), first, so that a user not allowed to
-- write it (an older ACL line without SET) fails before anything changed;
-- copy the entry (its fields, then the metadata) to the dead-letter stream
-- when given, XACK it, delete the lease so the halted owner's next renew
-- or attempt fails and a new owner continues after the head, and remove
-- the record. Once the lease is deleted no
-- attempt of the head starts anywhere: every attempt of a halted head
-- begins with begin_attempt, which needs the lease, and the head is acked.
--
-- A resolve that Redis runs twice (its reply lost, then resent by go-redis
-- or a proxy) finds the record gone, which reads as NOT_HALTED. Before it
-- refuses, a run looks for its op in the resolved note: when the note is
-- this op's, the first run resolved the head, and it answers as that run
-- did, with its dead-letter entry id. Another operator's resolve carries
-- another op and is refused.
-- Returns {"OK", the dead-letter entry id or ""} or {code, detail}.
local refused = head_refusal() -- lib/head.lua
if refused then
  local done = redis.call('GET', KEYS[5])
  if done then
    local ok, n = pcall(cjson.decode, done)
    if ok and type(n) == 'table' and n.op == ARGV[7] then
      return {'OK', n.dlq_id or ''}
    end
  end
  return refused
end
local note = {token = redis.call('GET', KEYS[3]) or '', entry_id = ARGV[4], command = ARGV[6], op = ARGV[7], dlq_id = ''}
redis.call('SET', KEYS[5], cjson.encode(note), 'PX', ARGV[5])
local dlqid = ''
if KEYS[6] then
  local args = {}
  local e = redis.call('XRANGE', KEYS[2], ARGV[4], ARGV[4])
  if #e > 0 then
    for _, v in ipairs(e[1][2]) do args[#args + 1] = v end
  end
  for i = 8, #ARGV do args[#args + 1] = ARGV[i] end
  dlqid = redis.call('XADD', KEYS[6], '*', unpack(args))
  -- The copy's id goes in the note too, for a resend's answer.
  note.dlq_id = dlqid
  redis.call('SET', KEYS[5], cjson.encode(note), 'PX', ARGV[5])
end
redis.call('XACK', KEYS[2], ARGV[3], ARGV[4])
redis.call('DEL', KEYS[3])
redis.call('DEL', KEYS[4])
redis.call('DEL', KEYS[1])
return {'OK', dlqid}
