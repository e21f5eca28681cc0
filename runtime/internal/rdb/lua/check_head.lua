-- check_head: the checks of resolve_head.lua (lib/head.lua, shared),
-- changing nothing: an operator's dry run of a skip or a DLQ move.
--
-- KEYS[1] the lease's control hash (rdb.MetaKey)
-- KEYS[2] the lane holding the head
-- KEYS[3] lease
-- ARGV[1] record (JSON) as read
-- ARGV[2] token of the owner that halted
-- ARGV[3] the handler or pm
-- ARGV[4] entry id
-- Returns {"OK", ""} when resolve_head would act, else {code, detail} as
-- resolve_head refuses.
local refused = head_refusal()
if refused then return refused end
return {'OK', ''}
