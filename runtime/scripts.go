package runtime

import (
	"context"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Every script takes Redis keys in KEYS and values in ARGV, so a script's
// keys are visible to Redis Cluster routing and nothing is string-built.
// Redis runs Lua 5.1: no goto, so loops nest.

// scriptPublish: KEYS stream, index, signal; ARGV key, signal maxlen,
// field/value pairs. Appends the entry, records the key in the index and
// signals idle consumers in one atomic step, so a consumer that sees the
// key or the signal always finds the entry.
var scriptPublish = redis.NewScript(`
local id = redis.call('XADD', KEYS[1], '*', unpack(ARGV, 3))
redis.call('SADD', KEYS[2], ARGV[1])
redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[2], '*', 'k', ARGV[1])
return id
`)

// scriptAcquire: KEYS lease, generation counter; ARGV owner, ttl ms.
// Returns {1, generation} when acquired, {0, current token} when held.
var scriptAcquire = redis.NewScript(`
local cur = redis.call('GET', KEYS[1])
if cur then return {0, cur} end
local gen = redis.call('INCR', KEYS[2])
redis.call('SET', KEYS[1], ARGV[1] .. ':' .. gen, 'NX', 'PX', ARGV[2])
return {1, gen}
`)

// scriptRenew: KEYS lease; ARGV token, ttl ms. 1 when renewed, 0 when the
// lease is gone or held by another token.
var scriptRenew = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
`)

// scriptRelease: KEYS lease; ARGV token. 1 when deleted, 0 when not ours.
var scriptRelease = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
`)

// fenceErr is the prefix of the error a fenced script returns; fencedError
// turns it into ErrFenced.
const fenceErr = "SEQBY_FENCED"

// scriptRead: KEYS lease, lanes in priority order; ARGV token (also the
// consumer name), group, count. Two passes: first the consumer's own
// pending entries (id 0) on every lane, then new entries ('>') lane by
// lane. A pending entry is one this owner (or a predecessor, after the
// claim's reclaim) was handed and did not ack: in flight at a crash,
// retried, or a halted head. It must run again before anything else, even
// before a newer entry on an earlier lane (a backfill head in flight when a
// primary entry arrived), or the partition would apply that entry between
// two runs of the head. New entries of a later lane are read only when
// earlier lanes have none.
// Returns {lane (1-based), entries} or {0} when every lane is drained.
// A lane's group is created (from id 0) the first time a read finds it
// missing, so a backfill lane may appear after the claim.
var scriptRead = redis.NewScript(`
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return redis.error_reply('SEQBY_FENCED lease ' .. KEYS[1] .. ' is not held by ' .. ARGV[1])
end
local function read(s, id)
  local r = redis.pcall('XREADGROUP', 'GROUP', ARGV[2], ARGV[1], 'COUNT', ARGV[3], 'STREAMS', s, id)
  if type(r) == 'table' and r.err then
    -- NOGROUP: a lane that appeared after the claim gets its group now.
    redis.pcall('XGROUP', 'CREATE', s, ARGV[2], '0')
    r = redis.call('XREADGROUP', 'GROUP', ARGV[2], ARGV[1], 'COUNT', ARGV[3], 'STREAMS', s, id)
  end
  return r
end
for _, id in ipairs({'0', '>'}) do
  for i = 2, #KEYS do
    if redis.call('EXISTS', KEYS[i]) == 1 then
      local r = read(KEYS[i], id)
      if r and r[1] and #r[1][2] > 0 then return {i - 1, r[1][2]} end
    end
  end
end
return {0}
`)

// scriptAck: KEYS lease, stream; ARGV token, group, id.
var scriptAck = redis.NewScript(`
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return redis.error_reply('SEQBY_FENCED lease ' .. KEYS[1] .. ' is not held by ' .. ARGV[1])
end
return redis.call('XACK', KEYS[2], ARGV[2], ARGV[3])
`)

// scriptReclaim: KEYS lease, lanes; ARGV token, group. Moves every pending
// entry of the group (past owners' in-flight entries) to the token's
// consumer, then deletes consumers that hold nothing, so past generations
// do not pile up in the group. Returns the number of entries moved.
var scriptReclaim = redis.NewScript(`
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return redis.error_reply('SEQBY_FENCED lease ' .. KEYS[1] .. ' is not held by ' .. ARGV[1])
end
local moved = 0
for i = 2, #KEYS do
  if redis.call('EXISTS', KEYS[i]) == 1 then
    redis.pcall('XGROUP', 'CREATE', KEYS[i], ARGV[2], '0')
    local cursor = '0-0'
    repeat
      local r = redis.call('XAUTOCLAIM', KEYS[i], ARGV[2], ARGV[1], 0, cursor, 'COUNT', 100, 'JUSTID')
      cursor = r[1]
      moved = moved + #r[2]
    until cursor == '0-0'
    local cs = redis.pcall('XINFO', 'CONSUMERS', KEYS[i], ARGV[2])
    if type(cs) == 'table' and not cs.err then
      for _, c in ipairs(cs) do
        local name, pending
        for j = 1, #c, 2 do
          if c[j] == 'name' then name = c[j + 1] end
          if c[j] == 'pending' then pending = c[j + 1] end
        end
        if name and name ~= ARGV[1] and pending == 0 then
          redis.call('XGROUP', 'DELCONSUMER', KEYS[i], ARGV[2], name)
        end
      end
    end
  end
end
return moved
`)

// scriptMember: KEYS members; ARGV owner, ttl ms, "1" join or "0" leave.
// Scores by Redis time so instances with skewed clocks agree, drops
// members whose heartbeat is older than ttl, and returns the live count.
var scriptMember = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - tonumber(ARGV[2]))
if ARGV[3] == '1' then
  redis.call('ZADD', KEYS[1], now, ARGV[1])
else
  redis.call('ZREM', KEYS[1], ARGV[1])
end
return redis.call('ZCARD', KEYS[1])
`)

var allScripts = []*redis.Script{scriptPublish, scriptAcquire, scriptRenew, scriptRelease,
	scriptRead, scriptAck, scriptReclaim, scriptMember, scriptSaveState, scriptReadOldest,
	scriptRecordHalt, scriptClearHalt, scriptResolveHead}

// LoadScripts loads every seqby script into the server's script cache.
// Engines call it at start; single calls also fall back to EVAL on
// NOSCRIPT (Script.Run), pipelined renews reload and retry.
func LoadScripts(ctx context.Context, c redis.UniversalClient) error {
	for _, s := range allScripts {
		if err := s.Load(ctx, c).Err(); err != nil {
			return err
		}
	}
	return nil
}

func isNoScript(err error) bool {
	return err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT")
}

// scriptSaveState: KEYS state hash [, lease]; ARGV expected version, data,
// token ("" without a lease), applied field ("" for none), entry id. With
// a lease, fails with the fence error unless it holds the token, so a
// stale pm owner cannot save. Then stores data as the next version only if
// the stored version (0 when none) is the expected one, recording in the
// same step the entry the state now includes. Returns {1, new version} or
// {0, stored version}.
var scriptSaveState = redis.NewScript(`
if KEYS[2] and redis.call('GET', KEYS[2]) ~= ARGV[3] then
  return redis.error_reply('SEQBY_FENCED lease ' .. KEYS[2] .. ' is not held by ' .. ARGV[3])
end
local cur = tonumber(redis.call('HGET', KEYS[1], 'version') or '0')
if cur ~= tonumber(ARGV[1]) then return {0, cur} end
redis.call('HSET', KEYS[1], 'version', cur + 1, 'data', ARGV[2])
if ARGV[4] ~= '' then redis.call('HSET', KEYS[1], ARGV[4], ARGV[5]) end
return {1, cur + 1}
`)

// scriptReadOldest: KEYS lease, lanes (the nprimary primary lanes first,
// then the backfill lanes); ARGV token (the consumer name), group,
// nprimary. A pm's owner reads several streams and applies the oldest
// entry first. First its own pending entries: only an entry this script
// returned and nobody acked is pending (in flight at a crash, retried, a
// halted head), and it must run again before anything new; the oldest
// pending head of the primary lanes, else of the backfill lanes. Else
// each lane's next new entry is peeked (XRANGE after the group's
// last-delivered-id), without delivering it, and only the oldest is
// delivered (XREADGROUP '>'): the oldest of the primary lanes, or of the
// backfill lanes when every primary lane is drained. Peeking keeps
// entries that were looked at but not chosen out of the pending list, so
// a pending entry always means "returned and not acked".
// Returns {lane (1-based), {entry}} or {0} when every lane is drained.
var scriptReadOldest = redis.NewScript(`
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return redis.error_reply('SEQBY_FENCED lease ' .. KEYS[1] .. ' is not held by ' .. ARGV[1])
end
local function pending(s)
  local r = redis.pcall('XREADGROUP', 'GROUP', ARGV[2], ARGV[1], 'COUNT', 1, 'STREAMS', s, '0')
  if type(r) == 'table' and r.err then
    -- NOGROUP: a lane that appeared after the claim; nothing is pending.
    redis.pcall('XGROUP', 'CREATE', s, ARGV[2], '0')
    return nil
  end
  if r and r[1] and #r[1][2] > 0 then return r[1][2][1] end
  return nil
end
local function peek(s)
  local last
  for _, g in ipairs(redis.call('XINFO', 'GROUPS', s)) do
    local name, id
    for j = 1, #g, 2 do
      if g[j] == 'name' then name = g[j + 1] end
      if g[j] == 'last-delivered-id' then id = g[j + 1] end
    end
    if name == ARGV[2] then last = id end
  end
  if not last then
    redis.call('XGROUP', 'CREATE', s, ARGV[2], '0')
    last = '0-0'
  end
  local r = redis.call('XRANGE', s, '(' .. last, '+', 'COUNT', 1)
  return r[1]
end
local function older(a, b)
  local ams, aseq = string.match(a, '^(%d+)-(%d+)$')
  local bms, bseq = string.match(b, '^(%d+)-(%d+)$')
  ams, bms = tonumber(ams), tonumber(bms)
  if ams ~= bms then return ams < bms end
  return tonumber(aseq) < tonumber(bseq)
end
local function pick(from, to, get)
  local best, at
  for i = from, to do
    if redis.call('EXISTS', KEYS[i]) == 1 then
      local e = get(KEYS[i])
      if e and (not best or older(e[1], best[1])) then best, at = e, i end
    end
  end
  return best, at
end
local np = tonumber(ARGV[3])
local e, at = pick(2, 1 + np, pending)
if not e then e, at = pick(2 + np, #KEYS, pending) end
if e then return {at - 1, {e}} end
e, at = pick(2, 1 + np, peek)
if not e then e, at = pick(2 + np, #KEYS, peek) end
if not e then return {0} end
local r = redis.call('XREADGROUP', 'GROUP', ARGV[2], ARGV[1], 'COUNT', 1, 'STREAMS', KEYS[at], '>')
return {at - 1, r[1][2]}
`)

// scriptRecordHalt: KEYS lease, halts; ARGV token, field, record. Writes
// the halt record only while the lease holds the token, so a stale owner
// never describes a head that has moved on.
var scriptRecordHalt = redis.NewScript(`
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return redis.error_reply('SEQBY_FENCED lease ' .. KEYS[1] .. ' is not held by ' .. ARGV[1])
end
return redis.call('HSET', KEYS[2], ARGV[2], ARGV[3])
`)

// scriptClearHalt: KEYS halts; ARGV field, record. Compare-and-delete:
// removes the record only if it is still exactly the one its caller judged
// stale, never a newer halt of the same partition. 1 when removed.
var scriptClearHalt = redis.NewScript(`
if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then
  return redis.call('HDEL', KEYS[1], ARGV[1])
end
return 0
`)

// scriptResolveHead: KEYS halts, head lane, lease [, dlq]; ARGV field,
// record, token, group, entry id, then the dlq metadata field/value pairs.
// The operator's compare-and-skip, all in one atomic step:
//   - the halt record must still be the one the operator read (NOT_HALTED),
//   - the lease must be free or held by the owner that halted, which is
//     idle waiting, never by an owner retrying the head (RETRYING),
//   - the entry must still be pending (STALE: the partition moved past it
//     and the record is stale),
//   - and be the group's first pending entry on the lane (NOT_HEAD, with
//     the actual first pending id).
//
// Then: copy the entry (its fields, then the metadata) to the dlq when
// given, XACK it, delete the lease so the halted owner's next renew fails
// and a new owner continues after the head, and remove the record.
// Returns {"OK", the dlq entry id or an empty string} or {code, detail}.
var scriptResolveHead = redis.NewScript(`
local rec = redis.call('HGET', KEYS[1], ARGV[1])
if rec ~= ARGV[2] then return {'NOT_HALTED', rec or ''} end
local cur = redis.call('GET', KEYS[3])
if cur and cur ~= ARGV[3] then return {'RETRYING', cur} end
local p = redis.pcall('XPENDING', KEYS[2], ARGV[4], ARGV[5], ARGV[5], 1)
if type(p) ~= 'table' or p.err or #p == 0 then return {'STALE', ''} end
p = redis.call('XPENDING', KEYS[2], ARGV[4], '-', '+', 1)
if p[1][1] ~= ARGV[5] then return {'NOT_HEAD', p[1][1]} end
local dlqid = ''
if KEYS[4] then
  local args = {}
  local e = redis.call('XRANGE', KEYS[2], ARGV[5], ARGV[5])
  if #e > 0 then
    for _, v in ipairs(e[1][2]) do args[#args + 1] = v end
  end
  for i = 6, #ARGV do args[#args + 1] = ARGV[i] end
  dlqid = redis.call('XADD', KEYS[4], '*', unpack(args))
end
redis.call('XACK', KEYS[2], ARGV[4], ARGV[5])
redis.call('DEL', KEYS[3])
redis.call('HDEL', KEYS[1], ARGV[1])
return {'OK', dlqid}
`)
