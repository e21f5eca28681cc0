-- cold: whether a partition's lanes may be let go (lease released,
-- partition reaped), prepended to the scripts that ask.
--
-- cold(lanes, idle_ms) is true when every lane either does not exist or is
-- empty with nothing pending in any of its groups, and the newest entry
-- ever appended to any lane (its stream's last-generated-id, which
-- retention does not move) is at least idle_ms old by the Redis clock.
local function cold(lanes, idle_ms)
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  for _, s in ipairs(lanes) do
    if redis.call('EXISTS', s) == 1 then
      if redis.call('XLEN', s) > 0 then return false end
      for _, g in ipairs(redis.call('XINFO', 'GROUPS', s)) do
        for j = 1, #g, 2 do
          if g[j] == 'pending' and g[j + 1] > 0 then return false end
        end
      end
      local info = redis.call('XINFO', 'STREAM', s)
      for j = 1, #info, 2 do
        if info[j] == 'last-generated-id' then
          local ms = tonumber(string.match(info[j + 1], '^(%d+)-'))
          if now - ms < idle_ms then return false end
        end
      end
    end
  end
  return true
end
