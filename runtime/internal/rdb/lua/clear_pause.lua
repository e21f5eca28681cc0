-- clear_pause: end a pause (Resume), returning the note the mark held. A
-- resume Redis ran twice (its reply lost, then resent by go-redis or a
-- proxy) finds the mark gone; it then finds its own op in the resumed
-- note and answers as the first run did, rather than "not paused". Another
-- operator's resume carries another op, and is told it was not paused.
--
-- KEYS[1] the pause mark (PauseKey or HandlerPauseKey)
-- KEYS[2] its resumed note (ResumedKey), in the mark's slot; absent when
--         the mark's name leaves it no key of its slot (ClearPause)
-- ARGV[1] the call's op (NewOp)
-- ARGV[2] how long the resumed note lives, in milliseconds (OpTTL)
-- Returns the note the mark held (the one this op ended), or nil when it
-- was not paused.
local note = redis.call('GET', KEYS[1])
if note then
  -- The resumed note first: a user not allowed to write it fails before
  -- the pause ends.
  if KEYS[2] then
    redis.call('SET', KEYS[2], ARGV[1] .. ' ' .. note, 'PX', ARGV[2])
  end
  redis.call('DEL', KEYS[1])
  return note
end
if KEYS[2] then
  local done = redis.call('GET', KEYS[2])
  local mine = ARGV[1] .. ' '
  if done and string.sub(done, 1, #mine) == mine then
    return string.sub(done, #mine + 1)
  end
end
return false
