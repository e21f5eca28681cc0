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
// consumer name), group, count. Reads the consumer's own pending entries
// (id 0) before new ones ('>') lane by lane, so a retried or reclaimed head
// comes first and a later lane is read only when earlier ones are drained.
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
for i = 2, #KEYS do
  if redis.call('EXISTS', KEYS[i]) == 1 then
    local pend = read(KEYS[i], '0')
    if pend and pend[1] and #pend[1][2] > 0 then return {i - 1, pend[1][2]} end
    local new = read(KEYS[i], '>')
    if new and new[1] and #new[1][2] > 0 then return {i - 1, new[1][2]} end
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
	scriptRead, scriptAck, scriptReclaim, scriptMember}

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
