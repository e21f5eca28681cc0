-- renew_many: extend every lease (of one slot) that still holds exactly
-- its token, in one call: the heartbeat's renewal of an instance's leases.
--
-- Uses wake() from lib/wake.lua.
--
-- KEYS    per lease: its key, then w pairs (a partition stream it covers,
--         its wake hash: WakeKey)
-- ARGV[1] ttl in milliseconds
-- ARGV    then per lease: the token it must hold, its group, w
-- Returns one element per lease: when renewed, 1 if it covers no
-- partition (w = 0), else the string wake() returns, one character per
-- pair, '1' where the wake hash names the owner once renewed, '0' where it
-- does not (no stream); 0 when it is gone or held by another token; -1
-- when its key holds another type (a fault of that lease alone: the
-- others are still renewed). Each lease is compare-and-set on its own
-- token, as in renew.lua.
--
-- A renewed lease's owner is named in its partitions' wake hashes where
-- it is not (a stream that did not exist when the lease was taken, such
-- as a pm's category first published to later, whose first entry the
-- owner has not read yet: name.lua names it then), so publishers wake it
-- there. The reply is the state after the call, so a call Redis runs
-- twice (a resend after a lost reply) replies the same: an owner that
-- remembers what it knew named can tell a '1' new to it, and read the
-- partition once, as publishes before may have signalled others only.
local out = {}
local k, a = 1, 2
while k <= #KEYS do
  local token, group, w = ARGV[a], ARGV[a + 1], 2 * tonumber(ARGV[a + 2])
  local v = redis.pcall('GET', KEYS[k])
  if type(v) == 'table' and v.err then
    out[#out + 1] = -1
  elseif v == token then
    out[#out + 1] = redis.call('PEXPIRE', KEYS[k], ARGV[1])
    local owner = string.match(token, '^(.*):[^:]*$')
    if w > 0 and owner then out[#out] = wake(k + 1, k + w, group, owner) end
  else
    out[#out + 1] = 0
  end
  k, a = k + 1 + w, a + 3
end
return out
