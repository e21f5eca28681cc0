-- head: the checks of an operator's resolve of a halted head, prepended
-- to resolve_head and check_head so that a dry run refuses exactly where
-- the real one does.
--
-- KEYS[1] the lease's control hash (rdb.MetaKey: fields halt, attempt),
-- KEYS[2] the lane holding the head, KEYS[3] the lease;
-- ARGV[1] the record (JSON) as read, ARGV[2] the token of the owner that
-- halted, ARGV[3] the handler or pm, ARGV[4] the entry id.
--
-- Uses group_of() from lib/groups.lua: the head is pending in the
-- handler's group on the lane, whichever it is now (a generation's, a
-- parked one, or the earlier layout's shared group).

-- head_group() is the name of the group the head is pending in: the
-- handler's on the lane, or the handler's name when it has none there or
-- the lane's groups cannot be read (no stream there; a user whose ACL
-- does not allow XINFO GROUPS, which the earlier layout's checks did not
-- need).
local function head_group()
  local gs = redis.pcall('XINFO', 'GROUPS', KEYS[2])
  if type(gs) ~= 'table' or gs.err then return ARGV[3] end
  local g = group_of(KEYS[2], ARGV[3])
  if g then return g.name end
  return ARGV[3]
end

-- head_refusal() is nil when the head may be resolved, else {code,
-- detail}: NOT_HALTED (the record changed), RETRYING (another owner holds
-- the lease), ATTEMPTING (the lease's owner, the halting one included,
-- is running an attempt of the head now: the attempt mark names the
-- token the lease holds and has not expired), STALE (the entry is no longer pending),
-- NOT_HEAD (another entry is the group's first pending one on the lane).
local function head_refusal()
  local rec = redis.call('HGET', KEYS[1], 'halt')
  if rec ~= ARGV[1] then return {'NOT_HALTED', rec or ''} end
  local cur = redis.call('GET', KEYS[3])
  if cur and cur ~= ARGV[2] then return {'RETRYING', cur} end
  if cur then
    local m = redis.call('HGET', KEYS[1], 'attempt')
    local tok, exp = string.match(m or '', '^(.*) (%d+)$')
    if tok == cur then
      local t = redis.call('TIME')
      if tonumber(exp) > tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) then
        return {'ATTEMPTING', cur}
      end
    end
  end
  local g = head_group()
  local p = redis.pcall('XPENDING', KEYS[2], g, ARGV[4], ARGV[4], 1)
  if type(p) ~= 'table' or p.err or #p == 0 then return {'STALE', ''} end
  p = redis.call('XPENDING', KEYS[2], g, '-', '+', 1)
  if p[1][1] ~= ARGV[4] then return {'NOT_HEAD', p[1][1]} end
  return nil
end
