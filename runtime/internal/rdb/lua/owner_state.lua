-- owner_state: whether a partition is owned, and if not whether it has
-- work for a group, for the report of partitions left without an owner.
--
-- KEYS[1] lease
-- KEYS[2..] the lanes the lease covers
-- ARGV[1] the group (handler) that owns the lease
-- Returns 1 when the lease is held (a string with a TTL: one of another
-- type, or without a TTL, blocks every acquire and counts as not held);
-- otherwise 0 when a lane has work for
-- the group (an entry pending, or one after the group's last-delivered-id;
-- any entry when the group does not exist on the lane yet), 2 when none
-- has (free, nothing to do: no owner is needed).
if redis.call('TYPE', KEYS[1])['ok'] == 'string' and redis.call('PTTL', KEYS[1]) > 0 then return 1 end
for i = 2, #KEYS do
  local s = KEYS[i]
  if redis.call('EXISTS', s) == 1 then
    local found = false
    for _, g in ipairs(redis.call('XINFO', 'GROUPS', s)) do
      local name, pending, last
      for j = 1, #g, 2 do
        if g[j] == 'name' then name = g[j + 1]
        elseif g[j] == 'pending' then pending = g[j + 1]
        elseif g[j] == 'last-delivered-id' then last = g[j + 1] end
      end
      if name == ARGV[1] then
        found = true
        if pending > 0 then return 0 end
        if #redis.call('XRANGE', s, '(' .. last, '+', 'COUNT', 1) > 0 then return 0 end
      end
    end
    if not found and redis.call('XLEN', s) > 0 then return 0 end
  end
end
return 2
