package guarantee

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seqby/seqby/runtime"
)

// ErrCommitFenced is returned by the Recorder when its commit found the
// partition's lease no longer holding the handler's token: a stale owner's
// effect, refused.
var ErrCommitFenced = errors.New("commit fenced: the lease no longer holds this handler's token")

// ErrPoison is what the Recorder returns for a Step with Fail set.
var ErrPoison = errors.New("poison step")

// ErrOutage is what the Recorder returns for a Step with Outage set while
// the key's outage flag is set.
var ErrOutage = errors.New("downstream outage")

// Recorder is the suite's handler. It keeps everything it observes in Redis,
// never in process memory, so the test process can check what every engine
// instance did:
//
//   - an in-progress marker per key (instance and event), set on entry and
//     cleared on exit if still its own; entering while another event of the
//     key holds it is recorded as an overlap;
//   - an entry log per key: every handler entry and exit, with the instance,
//     the lease token and Redis time;
//   - an append-only applied log per key, written by a commit fenced on the
//     lease token, plus an optimistic-concurrency state (the last seq applied,
//     advanced only by seq = state+1) that a re-run cannot move;
//   - a rejected log per key: commits the fence refused.
//
//seqby:handler
//seqby:key=client_id
type Recorder struct {
	// Redis is where records go.
	Redis redis.UniversalClient
	// Instance names the engine instance in records.
	Instance string
	// Witness, when set, also receives every entry, exit and commit, in a
	// Redis of its own: the failover tests' record of what ran, which a
	// failover of Redis cannot take back.
	Witness redis.UniversalClient
}

// On records one step. It sleeps SlowMS without watching ctx on purpose: a
// body that cannot be interrupted is the case the fence exists for, since a
// stalled owner may finish it after it lost its lease.
func (h *Recorder) On(ctx context.Context, e Step) error {
	li, leased := runtime.LeaseFromContext(ctx)
	event := e.ClientID + "#" + strconv.Itoa(e.Seq)
	holder := h.Instance + "|" + event
	record := h.Instance + "|" + li.Token + "|" + strconv.Itoa(e.Seq)
	// Records must land even when ctx was cancelled (a lease lost mid-body):
	// they are the test's evidence, not the handler's effect.
	rctx := context.WithoutCancel(ctx)
	lease, check := li.LeaseKey, "1"
	if !leased {
		// No lease (an unkeyed broker): nothing to fence against.
		lease, check = noLeaseKey(e.ClientID), "0"
	}
	if err := scriptEnter.Run(rctx, h.Redis, []string{markerKey(e.ClientID), overlapsKey(e.ClientID), entriesKey(e.ClientID), lease, lostLeaseKey(e.ClientID)},
		holder, event, record, li.Token, check).Err(); err != nil {
		return fmt.Errorf("record entry of %s: %w", event, err)
	}
	h.witness(rctx, e.ClientID, "enter|"+record)
	defer h.witness(rctx, e.ClientID, "exit|"+record)
	defer scriptExit.Run(rctx, h.Redis, []string{markerKey(e.ClientID), entriesKey(e.ClientID)}, holder, record)
	if e.Crash {
		os.Exit(3)
	}
	if e.SlowMS > 0 {
		time.Sleep(time.Duration(e.SlowMS) * time.Millisecond)
	}
	if e.Fail {
		return fmt.Errorf("step %s: %w", event, ErrPoison)
	}
	if e.Outage && h.Redis.Exists(rctx, outageKey(e.ClientID)).Val() == 1 {
		return fmt.Errorf("step %s: %w", event, ErrOutage)
	}
	ok, err := scriptCommit.Run(rctx, h.Redis, []string{lease, appliedKey(e.ClientID), rejectedKey(e.ClientID), stateKey(e.ClientID)},
		li.Token, e.Seq, h.Instance+"|"+li.Token, check).Int()
	if err != nil {
		return fmt.Errorf("commit %s: %w", event, err)
	}
	if ok == 1 {
		h.witness(rctx, e.ClientID, "commit|"+record)
	}
	if ok != 1 && !e.BlindCommit {
		return fmt.Errorf("step %s under %s: %w", event, li.Token, ErrCommitFenced)
	}
	return nil
}

// witness appends "phase|inst|token|seq|time" to key's list in the
// witness Redis, if there is one (time: its TIME, in microseconds).
func (h *Recorder) witness(ctx context.Context, key, rec string) {
	if h.Witness != nil {
		scriptWitness.Run(ctx, h.Witness, []string{witnessKey(key)}, rec)
	}
}

// The suite's Redis keys. A key's records share its partition's hash tag
// (the key), like the lease they are fenced by, so the scripts work on a
// Redis Cluster too.
func tag(key string) string            { return "{" + key + "}" }
func markerKey(key string) string      { return tag(key) + ":guarantee:inprogress" }
func overlapsKey(key string) string    { return tag(key) + ":guarantee:overlaps" }
func entriesKey(key string) string     { return tag(key) + ":guarantee:entries" }
func appliedKey(key string) string     { return tag(key) + ":guarantee:applied" }
func rejectedKey(key string) string    { return tag(key) + ":guarantee:rejected" }
func stateKey(key string) string       { return tag(key) + ":guarantee:state" }
func outageKey(key string) string      { return tag(key) + ":guarantee:outage" }
func lostLeaseKey(key string) string   { return tag(key) + ":guarantee:lostlease" }
func witnessKey(key string) string     { return tag(key) + ":guarantee:witness" }
func haltsKey() string                 { return "guarantee:halts" }
func statusKey(instance string) string { return "guarantee:status:" + instance }

// pausedStatusKey holds an instance's snapshots of its paused partitions.
func pausedStatusKey(instance string) string { return "guarantee:paused:" + instance }

// noLeaseKey stands in for the lease key when there is none (inline broker).
func noLeaseKey(key string) string { return tag(key) + ":guarantee:nolease" }

// The scripts take keys in KEYS and values in ARGV. Times are Redis TIME in
// microseconds, one clock for every instance.

// scriptEnter: KEYS marker, overlaps, entries, lease, lost-lease log; ARGV
// holder ("inst|event"), event, record ("inst|token|seq"), token, check
// ("1" to look at the lease). An entry while a different event of the key
// holds the marker is an overlap. The same event entered again (a re-run
// by a new owner while a stalled one is still inside it) is the
// at-least-once case the guarantee allows, not an overlap. An entry while the
// lease holds another owner's token is logged as an attempt on a lost
// lease (an empty lease is a deletion racing the entry).
var scriptEnter = redis.NewScript(`
local t = redis.call('TIME')
local now = t[1] .. string.format('%06d', tonumber(t[2]))
local cur = redis.call('GET', KEYS[1])
if cur then
  local sep = string.find(cur, '|', 1, true)
  if string.sub(cur, sep + 1) ~= ARGV[2] then
    redis.call('RPUSH', KEYS[2], cur .. ' was in progress when ' .. ARGV[1] .. ' entered at ' .. now)
  end
end
if ARGV[5] == '1' then
  local l = redis.call('GET', KEYS[4])
  if l and l ~= ARGV[4] then
    redis.call('RPUSH', KEYS[5], ARGV[3] .. ' entered at ' .. now .. ' while the lease held ' .. l)
  end
end
redis.call('SET', KEYS[1], ARGV[1])
redis.call('RPUSH', KEYS[3], 'enter|' .. ARGV[3] .. '|' .. now)
return now
`)

// scriptWitness: KEYS the witness list; ARGV record. Appends
// "record|now".
var scriptWitness = redis.NewScript(`
local t = redis.call('TIME')
return redis.call('RPUSH', KEYS[1], ARGV[1] .. '|' .. t[1] .. string.format('%06d', tonumber(t[2])))
`)

// scriptExit: KEYS marker, entries; ARGV holder, record. Clears the marker
// only if it is still this holder's.
var scriptExit = redis.NewScript(`
local t = redis.call('TIME')
local now = t[1] .. string.format('%06d', tonumber(t[2]))
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
redis.call('RPUSH', KEYS[2], 'exit|' .. ARGV[2] .. '|' .. now)
return now
`)

// scriptCommit: KEYS lease, applied, rejected, state; ARGV token, seq,
// "inst|token", check ("1" to fence on the lease). Appends "seq|inst|token"
// to the applied log only while the lease holds the token, and advances the
// state only from seq-1 to seq (optimistic concurrency: a re-run of an
// applied event leaves it alone, a gap stalls it).
var scriptCommit = redis.NewScript(`
local rec = ARGV[2] .. '|' .. ARGV[3]
if ARGV[4] == '1' and redis.call('GET', KEYS[1]) ~= ARGV[1] then
  redis.call('RPUSH', KEYS[3], rec)
  return 0
end
redis.call('RPUSH', KEYS[2], rec)
local v = tonumber(redis.call('GET', KEYS[4]) or '0')
if tonumber(ARGV[2]) == v + 1 then redis.call('SET', KEYS[4], ARGV[2]) end
return 1
`)
