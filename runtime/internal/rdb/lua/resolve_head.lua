-- resolve_head: the operator's compare-and-skip of a halted head, with an
-- optional copy to the dead-letter stream, in one atomic step.
--
-- KEYS[1] the handler's halts hash
-- KEYS[2] the lane holding the head
-- KEYS[3] lease
-- KEYS[4] dead-letter stream (optional)
-- ARGV[1] field (the partition)
-- ARGV[2] record (JSON) as read
-- ARGV[3] token of the owner that halted
-- ARGV[4] group
-- ARGV[5] entry id
-- ARGV[6..] dead-letter metadata field/value pairs
--
-- Checks, in order:
--   - the halt record must still be the one the operator read (NOT_HALTED),
--   - the lease must be free or held by the owner that halted, which is
--     idle waiting, never by an owner retrying the head (RETRYING),
--   - the entry must still be pending (STALE: the partition moved past it
--     and the record is stale),
--   - and be the group's first pending entry on the lane (NOT_HEAD, with
--     the actual first pending id).
-- Then: copy the entry (its fields, then the metadata) to the dead-letter
-- stream when given, XACK it, delete the lease so the halted owner's next
-- renew fails and a new owner continues after the head, and remove the
-- record.
-- Returns {"OK", the dead-letter entry id or ""} or {code, detail}.
local rec = redis.call('HGET', KEYS[1], ARGV[1])
if rec ~= ARGV[2] then return {'NOT_HALTED', rec or ''} end
local cur = redis.call('GET', KEYS[3])
if cur and cur ~= ARGV[3] then return {'RETRYING', cur} end
local p = redis.pcall('XPENDING', KEYS[2], ARGV[4], ARGV[5], ARGV[5], 1)
if type(p) ~= 'table' or p.err or #p == 0 then return {'STALE', ''} end
p = redis.call('XPENDING', KEYS[2], ARGV[4], '-', '+', 1)
if p[1][1] ~= ARGV[5] then return {'NOT_HEAD', p[1][1]} end
local dlqid = ''
if KEYS[4] then
  local args = {}
  local e = redis.call('XRANGE', KEYS[2], ARGV[5], ARGV[5])
  if #e > 0 then
    for _, v in ipairs(e[1][2]) do args[#args + 1] = v end
  end
  for i = 6, #ARGV do args[#args + 1] = ARGV[i] end
  dlqid = redis.call('XADD', KEYS[4], '*', unpack(args))
end
redis.call('XACK', KEYS[2], ARGV[4], ARGV[5])
redis.call('DEL', KEYS[3])
redis.call('HDEL', KEYS[1], ARGV[1])
return {'OK', dlqid}
