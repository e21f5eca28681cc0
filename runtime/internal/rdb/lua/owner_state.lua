-- owner_state: whether a partition is owned, and if not whether it has
-- work for a group, for the report of partitions left without an owner.
--
-- KEYS[1] lease
-- KEYS[2..] the lanes the lease covers
-- ARGV[1] the handler or pm that owns the lease
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
    -- The group's on the lane, whichever it is now (lib/groups.lua).
    local g = group_of(s, ARGV[1])
    if g then
      if g.pending > 0 then return 0 end
      if #redis.call('XRANGE', s, '(' .. g.last, '+', 'COUNT', 1) > 0 then return 0 end
    elseif redis.call('XLEN', s) > 0 then
      return 0
    end
  end
end
return 2
