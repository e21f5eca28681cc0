-- audit: append an operator action to the audit stream, once per op. An
-- append whose reply was lost is sent again with the same op (go-redis
-- resends it, a proxy may replay it): that run finds the op in the
-- stream's entries of the last OpTTL and answers with the entry the first
-- one appended, so one action is one entry.
--
-- KEYS[1] the audit stream (AuditKey)
-- ARGV[1] the stream's cap, about (XADD MAXLEN ~)
-- ARGV[2] the op
-- ARGV[3] how long an op is looked for, in milliseconds (OpTTL)
-- ARGV[4..] the entry's fields, name/value pairs (the op is written first,
--           as the field op)
-- Returns the entry's id: the one appended now, or the one this op
-- appended before.
--
-- The op lives in its entry, so an append needs no key of its own: it
-- reads the entries of the last OpTTL, newest first (a resend finds its
-- op among the first), at most the stream's cap.
local t = redis.call('TIME')
local since = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) - tonumber(ARGV[3])
for _, e in ipairs(redis.call('XREVRANGE', KEYS[1], '+', string.format('%.0f', math.max(since, 0)), 'COUNT', ARGV[1])) do
  local f = e[2]
  for j = 1, #f, 2 do
    if f[j] == 'op' then
      if f[j + 1] == ARGV[2] then return e[1] end
      break
    end
  end
end
return redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[1], '*', 'op', ARGV[2], unpack(ARGV, 4))
