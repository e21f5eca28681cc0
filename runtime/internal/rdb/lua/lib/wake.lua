-- wake: the owners a publisher wakes (rdb.WakeKey), prepended to the
-- scripts that take, renew, name or give up a lease. Their KEYS end with
-- w pairs: a partition stream the lease covers, then its wake hash.
--
-- wake(first, last, group, owner) names owner as the holder of group's
-- lease in the wake hashes of the pairs KEYS[first..last] (written only
-- where it differs: renewals call it every heartbeat); an owner of "" says the
-- group wants the partition but nobody holds it (an acquire found it
-- cold), so publishes signal every instance. A partition without a stream
-- gets no name: the reaper, which deletes the hash, only visits keys that
-- were published to, and a publish to a partition that names nobody
-- signals every instance anyway; the owner is named once the stream
-- exists, by its next renewal (renew_many.lua) or by name.lua, for its
-- first read of the stream.
-- It returns one character per pair, '1' where the hash names owner once
-- it ran (named before, or now), '0' where it does not (no stream): the
-- state after the call, so a call Redis runs twice replies the same.
--
-- unwake(first, last, group, token) takes the group's field out where it still
-- names the owner of token ("<owner>:<generation>"), so a release never
-- removes a later owner's name.
local function wake(first, last, group, owner)
  local named = {}
  for i = first, last - 1, 2 do
    local ok = redis.call('HGET', KEYS[i + 1], group) == owner
    if not ok and redis.call('EXISTS', KEYS[i]) == 1 then
      redis.call('HSET', KEYS[i + 1], group, owner)
      ok = true
    end
    if ok then named[#named + 1] = '1' else named[#named + 1] = '0' end
  end
  return table.concat(named)
end

local function unwake(first, last, group, token)
  local owner = string.match(token, '^(.*):[^:]*$')
  if not owner then return end
  for i = first + 1, last, 2 do
    if redis.call('HGET', KEYS[i], group) == owner then redis.call('HDEL', KEYS[i], group) end
  end
end
