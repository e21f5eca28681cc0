-- renew_many: extend every lease (of one slot) that still holds exactly
-- its token, in one call: the heartbeat's renewal of an instance's leases.
--
-- KEYS[i] lease i
-- ARGV[1] ttl in milliseconds
-- ARGV[i + 1] the token lease i must hold
-- Returns one integer per lease: 1 when renewed, 0 when it is gone or held
-- by another token, -1 when its key holds another type (a fault of that
-- lease alone: the others are still renewed). Each lease is
-- compare-and-set on its own token, as in renew.lua.
local out = {}
for i = 1, #KEYS do
  local v = redis.pcall('GET', KEYS[i])
  if type(v) == 'table' and v.err then
    out[i] = -1
  elseif v == ARGV[i + 1] then
    out[i] = redis.call('PEXPIRE', KEYS[i], ARGV[1])
  else
    out[i] = 0
  end
end
return out
