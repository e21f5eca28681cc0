-- renew: extend a lease that still holds exactly this token.
--
-- KEYS[1] lease
-- ARGV[1] token
-- ARGV[2] ttl in milliseconds
-- Returns 1 when renewed, 0 when the lease is gone or held by another token.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
