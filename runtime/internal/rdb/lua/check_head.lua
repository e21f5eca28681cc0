-- check_head: the checks of resolve_head.lua, changing nothing: an
-- operator's dry run of a skip or a DLQ move. Keep the two in step (a
-- test runs both on the same cases).
--
-- KEYS[1] the halt record
-- KEYS[2] the lane holding the head
-- KEYS[3] lease
-- ARGV[1] record (JSON) as read
-- ARGV[2] token of the owner that halted
-- ARGV[3] group
-- ARGV[4] entry id
-- Returns {"OK", ""} when resolve_head would act, else {code, detail} as
-- resolve_head refuses.
local rec = redis.call('GET', KEYS[1])
if rec ~= ARGV[1] then return {'NOT_HALTED', rec or ''} end
local cur = redis.call('GET', KEYS[3])
if cur and cur ~= ARGV[2] then return {'RETRYING', cur} end
local p = redis.pcall('XPENDING', KEYS[2], ARGV[3], ARGV[4], ARGV[4], 1)
if type(p) ~= 'table' or p.err or #p == 0 then return {'STALE', ''} end
p = redis.call('XPENDING', KEYS[2], ARGV[3], '-', '+', 1)
if p[1][1] ~= ARGV[4] then return {'NOT_HEAD', p[1][1]} end
return {'OK', ''}
