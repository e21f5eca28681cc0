-- clear_pause: end a pause (Resume), returning the note the pause held. A
-- resume Redis ran twice (its reply lost, then resent by go-redis or a
-- proxy) finds the pause gone; it then finds its own op in the resumed
-- note and answers as the first run did, rather than "not paused". Another
-- operator's resume carries another op, and is told it was not paused.
--
-- KEYS[1] the control hash (rdb.MetaKey of a partition's lease, or a
--         handler's ControlKey): fields paused (the note) and
--         resumed ("<expiry, Redis ms> <op> <note>")
-- ARGV[1] the call's op (NewOp)
-- ARGV[2] how long the resumed note lives, in milliseconds (OpTTL)
-- Returns the note the pause held (the one this op ended), or nil when it
-- was not paused.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local note = redis.call('HGET', KEYS[1], 'paused')
if note then
  redis.call('HSET', KEYS[1], 'resumed', string.format('%d', now + tonumber(ARGV[2])) .. ' ' .. ARGV[1] .. ' ' .. note)
  redis.call('HDEL', KEYS[1], 'paused')
  return note
end
local done = redis.call('HGET', KEYS[1], 'resumed')
if done then
  local exp, rest = string.match(done, '^(%d+) (.*)$')
  local mine = ARGV[1] .. ' '
  if exp and tonumber(exp) > now and string.sub(rest, 1, #mine) == mine then
    return string.sub(rest, #mine + 1)
  end
end
return false
