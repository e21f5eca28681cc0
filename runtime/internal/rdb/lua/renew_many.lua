-- renew_many: extend every lease (of one slot) that still holds exactly
-- its token, in one call: the heartbeat's renewal of an instance's leases,
-- and of the attempt marks of the halted heads they are attempting.
--
-- Uses wake() from lib/wake.lua.
--
-- KEYS    per lease: its key, its control hash (rdb.MetaKey) when m is 1,
--         then w pairs (a partition stream it covers, its wake hash:
--         WakeKey)
-- ARGV[1] ttl in milliseconds
-- ARGV    then per lease: the token it must hold, its group, w, m (1 when
--         its owner is attempting the halted head: its attempt mark is
--         extended with it)
-- Returns one element per lease: when renewed, 1 if it covers no
-- partition (w = 0), else the string wake() returns, one character per
-- pair, '1' where the wake hash names the owner once renewed, '0' where it
-- does not (no stream); 0 when it is gone or held by another token; -1
-- when its key holds another type (a fault of that lease alone: the
-- others are still renewed); -2 when its attempt mark could not be
-- extended (its write refused: Redis 7.0 refuses writes at maxmemory
-- until a script's first write): neither is. Each lease is compare-and-set on its own
-- token, as in renew.lua.
--
-- An attempt mark (begin_attempt.lua) is extended to the lease's new
-- expiry in the same call, only while it names the token: a mark and its
-- lease never expire apart while the owner renews, so an operator's
-- resolve never runs beside a running attempt (lib/head.lua), and a mark
-- whose attempt ended (its owner no longer sends m) lapses within a TTL.
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
local now
local k, a = 1, 2
while k <= #KEYS do
  local token, group, w, m = ARGV[a], ARGV[a + 1], 2 * tonumber(ARGV[a + 2]), ARGV[a + 3] == '1'
  local meta = m and KEYS[k + 1] or nil
  local pairs_at = m and k + 2 or k + 1
  local v = redis.pcall('GET', KEYS[k])
  if type(v) == 'table' and v.err then
    out[#out + 1] = -1
  elseif v == token then
    -- The mark first: a lease is renewed only with its mark, so the two
    -- never expire apart (a mark's write refused, at maxmemory before the
    -- call's first write, renews neither).
    local marked = true
    if meta then
      local mark = redis.pcall('HGET', meta, 'attempt')
      if type(mark) == 'string' and string.match(mark, '^(.*) %d+$') == token then
        if not now then
          local t = redis.call('TIME')
          now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
        end
        local r = redis.pcall('HSET', meta, 'attempt', token .. ' ' .. (now + tonumber(ARGV[1])))
        marked = not (type(r) == 'table' and r.err)
      end
    end
    if not marked then
      out[#out + 1] = -2
    else
      out[#out + 1] = redis.call('PEXPIRE', KEYS[k], ARGV[1])
      local owner = string.match(token, '^(.*):[^:]*$')
      if w > 0 and owner then out[#out] = wake(pairs_at, pairs_at + w - 1, group, owner) end
    end
  else
    out[#out + 1] = 0
  end
  k, a = pairs_at + w, a + 4
end
return out
