-- end_attempt: delete the attempt mark begin_attempt.lua set, if it still
-- names this token.
--
-- KEYS[1] the lease's control hash (rdb.MetaKey)
-- ARGV[1] token
-- Returns 1 when deleted, 0 when the mark names another token or none.
local m = redis.call('HGET', KEYS[1], 'attempt')
if m and string.match(m, '^(.*) %d+$') == ARGV[1] then
  return redis.call('HDEL', KEYS[1], 'attempt')
end
return 0
