-- name: name a lease's owner in the wake hashes of partitions it covers,
-- at its first read of one that had no stream when it took the lease (a
-- pm's category first published to later), so that publishes to it wake
-- this owner from then on and not only the other handlers' owners named
-- there.
--
-- Uses wake() from lib/wake.lua.
--
-- KEYS[1] lease
-- KEYS[2..] pairs: a partition stream the lease covers, its wake hash
--           (WakeKey)
-- ARGV[1] token
-- ARGV[2] the lease's group, its field in the wake hashes
-- Returns wake()'s string: one character per pair, '1' where the hash
-- names the owner once it ran, '0' where it does not (no stream); the
-- SEQBY_FENCED error, having written nothing, when the lease does not hold
-- the token, so a stale owner never overwrites its successor's name.
--
-- Running it twice leaves the same hashes and replies the same: wake()
-- writes only where the name differs, and replies the state after it.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return redis.error_reply('SEQBY_FENCED lease ' .. KEYS[1] .. ' is not held by ' .. ARGV[1])
end
local owner = string.match(ARGV[1], '^(.*):[^:]*$')
if not owner then return redis.error_reply('ERR name: token ' .. ARGV[1] .. ' has no generation') end
return wake(2, #KEYS, ARGV[2], owner)
