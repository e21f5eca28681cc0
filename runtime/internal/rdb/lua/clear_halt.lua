-- clear_halt: compare-and-delete of a halt record: removes it only if it
-- is still exactly the one its caller judged stale, never a newer halt of
-- the same partition.
--
-- KEYS[1] the handler's halts hash
-- ARGV[1] field (the partition)
-- ARGV[2] record (JSON) as read
-- Returns 1 when removed.
if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then
  return redis.call('HDEL', KEYS[1], ARGV[1])
end
return 0
