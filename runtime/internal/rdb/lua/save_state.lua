-- save_state: store a process manager instance's state as the next
-- version, optimistically and, under a lease, fenced.
--
-- KEYS[1] state hash (fields "version", "data", "applied:<stream>")
-- KEYS[2] the pm lease (optional)
-- ARGV[1] expected stored version (0 when none)
-- ARGV[2] data
-- ARGV[3] token ("" without a lease)
-- ARGV[4] applied field ("" for none)
-- ARGV[5] entry id the state now includes
-- ARGV[6] the save's nonce, unique per save (a call sent again carries it)
-- Returns {1, new version} or {0, stored version}; the SEQBY_FENCED error
-- when a lease is given and does not hold the token, so a stale pm owner
-- cannot save. The applied field is written in the same step, so the
-- state records exactly the entries it includes.
--
-- A save may run twice (a client resends a call whose reply it lost): the
-- second run finds the version it wrote itself. The nonce, kept in the
-- field "saved_by" with the version it wrote, tells that from another
-- writer's save, so the second run answers as the first did instead of
-- reporting a conflict (on which a non-sequential pm would apply the
-- event again, to the state that already holds it).
if KEYS[2] and redis.call('GET', KEYS[2]) ~= ARGV[3] then
  return redis.error_reply('SEQBY_FENCED lease ' .. KEYS[2] .. ' is not held by ' .. ARGV[3])
end
local cur = tonumber(redis.call('HGET', KEYS[1], 'version') or '0')
if cur ~= tonumber(ARGV[1]) then
  if cur == tonumber(ARGV[1]) + 1 and redis.call('HGET', KEYS[1], 'saved_by') == ARGV[6] then
    return {1, cur}
  end
  return {0, cur}
end
redis.call('HSET', KEYS[1], 'version', cur + 1, 'data', ARGV[2], 'saved_by', ARGV[6])
if ARGV[4] ~= '' then redis.call('HSET', KEYS[1], ARGV[4], ARGV[5]) end
return {1, cur + 1}
