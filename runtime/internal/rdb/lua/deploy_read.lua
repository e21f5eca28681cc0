-- deploy_read: the deploy records of a handler (DeployKey): one per
-- engine instance that ran it, "v1|<kind>|<since>|<build>|<data>".
--
-- KEYS[1] the handler's deploy records
-- ARGV[1] a build whose records are left out ("" leaves none out)
-- Returns owner, record, owner, record, ...
local out = {}
for _, owner in ipairs(redis.call('HKEYS', KEYS[1])) do
  local v = redis.call('HGET', KEYS[1], owner)
  if v and (ARGV[1] == '' or string.match(v, '^v1|[^|]*|%d+|([^|]*)|') ~= ARGV[1]) then
    out[#out + 1] = owner
    out[#out + 1] = v
  end
end
return out
