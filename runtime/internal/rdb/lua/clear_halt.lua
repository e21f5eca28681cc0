-- clear_halt: compare-and-delete of a halt record: removes it only if it
-- is still exactly the one its caller judged stale, never a newer halt of
-- the same partition.
--
-- KEYS[1] the lease's control hash (rdb.MetaKey): field halt
-- ARGV[1] record (JSON) as read
-- Returns 1 when removed.
if redis.call('HGET', KEYS[1], 'halt') == ARGV[1] then
  return redis.call('HDEL', KEYS[1], 'halt')
end
return 0
