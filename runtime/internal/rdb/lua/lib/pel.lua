-- pel: pending-entries-list helpers, prepended to the scripts that use
-- them.

-- deliveries(stream, group, id) is how many times the entry was delivered
-- in group (XREADGROUP and XCLAIM count), 0 when it is not pending.
local function deliveries(stream, group, id)
  local p = redis.call('XPENDING', stream, group, id, id, 1)
  if p[1] then return p[1][4] end
  return 0
end
