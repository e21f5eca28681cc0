-- release: delete a lease that still holds this token, so the next owner
-- need not wait for the TTL.
--
-- KEYS[1] lease
-- ARGV[1] token
-- Returns 1 when deleted, 0 when not ours.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
