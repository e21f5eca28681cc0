-- append_once: append an entry unless its message id was appended to the
-- partition within the dedup window (an idempotent publish).
--
-- KEYS[1] the lane (partition stream or backfill lane)
-- KEYS[2] the message id's dedup key (DedupKey), in the lane's slot
-- ARGV[1] dedup window in milliseconds, a whole number, at least 1
-- ARGV[2..] the entry's fields, name/value pairs
-- Returns {entry id, 1} when appended, {the first entry's id, 0} when the
-- id was appended within the window: nothing is appended then, but the id
-- is written again with its TTL kept. That write is what a WAIT after a
-- re-publish (WaitForReplicas, answering ErrNotDurable) counts from: WAIT
-- waits for the connection's last write, and without one it would count
-- nothing and report a first append that never reached the replicas as
-- acknowledged (replication is one ordered stream, so replicas that have
-- this write have the first append too). A window
-- that SET ... PX would refuse is an error reply before anything is
-- written: failing after the XADD would leave the entry stored while the
-- publish reports a failure, and every retry would store it again.
local window = ARGV[1]
if not string.match(window, '^[1-9]%d*$') or #window > 15 then
  return redis.error_reply('ERR append_once: the dedup window must be a whole number of milliseconds, at least 1, got "' .. window .. '"')
end
local prev = redis.call('GET', KEYS[2])
if prev then
  redis.call('SET', KEYS[2], prev, 'KEEPTTL')
  return {prev, 0}
end
local fields = {}
for i = 2, #ARGV do fields[#fields + 1] = ARGV[i] end
local id = redis.call('XADD', KEYS[1], '*', unpack(fields))
redis.call('SET', KEYS[2], id, 'PX', window)
return {id, 1}
