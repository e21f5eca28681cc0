-- owner_claim: take an OwnerID for one engine incarnation (OwnerKey).
--
-- KEYS[1] the OwnerID's key
-- ARGV[1] this incarnation
-- ARGV[2] ttl in milliseconds
-- Returns {1} when taken (free, or already this incarnation's), else
-- {0, the holder's incarnation, its remaining TTL in milliseconds}.
local cur = redis.call('GET', KEYS[1])
if not cur or cur == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return {1}
end
return {0, cur, redis.call('PTTL', KEYS[1])}
