-- clear_halt: compare-and-delete of a halt record: removes it only if it
-- is still exactly the one its caller judged stale, never a newer halt of
-- the same partition.
--
-- KEYS[1] the halt record
-- ARGV[1] record (JSON) as read
-- Returns 1 when removed.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
