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
-- Returns {1, new version} or {0, stored version}; the SEQBY_FENCED error
-- when a lease is given and does not hold the token, so a stale pm owner
-- cannot save. The applied field is written in the same step, so the
-- state records exactly the entries it includes.
if KEYS[2] and redis.call('GET', KEYS[2]) ~= ARGV[3] then
  return redis.error_reply('SEQBY_FENCED lease ' .. KEYS[2] .. ' is not held by ' .. ARGV[3])
end
local cur = tonumber(redis.call('HGET', KEYS[1], 'version') or '0')
if cur ~= tonumber(ARGV[1]) then return {0, cur} end
redis.call('HSET', KEYS[1], 'version', cur + 1, 'data', ARGV[2])
if ARGV[4] ~= '' then redis.call('HSET', KEYS[1], ARGV[4], ARGV[5]) end
return {1, cur + 1}
