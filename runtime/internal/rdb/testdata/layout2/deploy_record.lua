-- deploy_record: an engine instance records how it runs a handler (its
-- kind) and its build (a digest of kind and routes), unless an instance of
-- another kind, or of another key layout, is live: a handler whose kind
-- changed under its name is refused while the other kind's consumers
-- share its groups, and engines of two key layouts never share a handler.
--
-- KEYS[1] the handler's deploy records (hash: owner -> record)
-- ARGV[1] this owner id
-- ARGV[2] its kind as recorded: "keyed", "sequential" or "unkeyed",
--         followed by its layout's tag (" under key layout 2 (...)",
--         rdb.RecordedKind); a record without a tag is layout 1 (the
--         releases before layouts were recorded)
-- ARGV[3] its build
-- ARGV[4] its data (opaque: incarnation and routes)
-- ARGV[5] n: the number of dead records that follow
-- ARGV[6 .. 5+2n] owner, record: records of instances found dead,
--         removed if still unchanged
-- ARGV[6+2n ..] owner, class ("leased" or "shared"): live members of the
--         handler's member set, judged by an earlier build's traces, that
--         have no record
-- Returns {1, since}: recorded; since is when this build was first
-- recorded while live (Redis ms), inherited from a live record of the same
-- build, else now. Or {0, owner, kind field}: an instance of another kind
-- or layout is live; nothing is written.
--
-- The record's kind field holds no '|': the previous release's script
-- matches '^v1|([^|]*)|(%d+)|([^|]*)|' and refuses when the field is not
-- its own kind, which the layout's tag makes sure of.
local key, self, recorded, build = KEYS[1], ARGV[1], ARGV[2], ARGV[3]
local function split(field)
  local k = string.match(field, '^(.-) under key layout ')
  if not k then return field, '1' end
  return k, string.match(field, ' under key layout (%d+)') or '?'
end
local kind, layout = split(recorded)
local n = tonumber(ARGV[5])
for i = 0, n - 1 do
  local owner, rec = ARGV[6 + 2 * i], ARGV[7 + 2 * i]
  if redis.call('HGET', key, owner) == rec then
    redis.call('HDEL', key, owner)
  end
end
local function class(k)
  if k == 'unkeyed' then return 'shared' end
  return 'leased'
end
local since
for _, owner in ipairs(redis.call('HKEYS', key)) do
  if owner ~= self then
    local f, s, b = string.match(redis.call('HGET', key, owner) or '', '^v1|([^|]*)|(%d+)|([^|]*)|')
    if f then
      local k, l = split(f)
      if k ~= kind or l ~= layout then
        return {0, owner, f}
      end
      s = tonumber(s)
      if b == build and (not since or s < since) then
        since = s
      end
    end
  end
end
for i = 6 + 2 * n, #ARGV - 1, 2 do
  local owner, c = ARGV[i], ARGV[i + 1]
  if owner ~= self and not redis.call('HGET', key, owner) and c ~= class(kind) then
    return {0, owner, c}
  end
end
if not since then
  local t = redis.call('TIME')
  since = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
redis.call('HSET', key, self, 'v1|' .. recorded .. '|' .. string.format('%d', since) .. '|' .. build .. '|' .. ARGV[4])
return {1, since}
