-- ids: stream entry id helpers, prepended to the scripts that compare ids
-- (a script cannot load another).
local function older(a, b)
  local ams, aseq = string.match(a, '^(%d+)-(%d+)$')
  local bms, bseq = string.match(b, '^(%d+)-(%d+)$')
  ams, bms = tonumber(ams), tonumber(bms)
  if ams ~= bms then return ams < bms end
  return tonumber(aseq) < tonumber(bseq)
end
