package rdb

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// HaltRecord is the JSON value of a halted partition's record (the field
// MetaHalt of RecordKey). The engine writes it when a partition halts; the
// operator package reads it. It describes the head; the halt itself is
// the head staying pending, so a record is trusted only together with the
// group's pending list (IsPending).
type HaltRecord struct {
	Handler string `json:"handler"`
	// PM is true for a sequential process manager's correlation value.
	PM bool `json:"pm,omitempty"`
	// Partition is the field name: a keyed handler's partition stream
	// (category:{key}) or a pm's correlation value.
	Partition string `json:"partition"`
	Category  string `json:"category"` // category of the head's stream
	Key       string `json:"key"`      // partition key or correlation value
	// Stream is the lane holding the head; Streams all lanes read under
	// the lease (primary streams first, then backfill lanes).
	Stream      string    `json:"stream"`
	Streams     []string  `json:"streams"`
	EntryID     string    `json:"entry_id"`
	MessageType string    `json:"type,omitempty"`
	MessageID   string    `json:"message_id,omitempty"`
	Reason      string    `json:"reason"`
	Error       string    `json:"error,omitempty"`
	Owner       string    `json:"owner"`
	Token       string    `json:"token"` // lease token of the halting owner
	LeaseKey    string    `json:"lease_key"`
	At          time.Time `json:"at"`
}

// Index adds the record key (a control hash) to handler's index
// (MarksKey): the next owner of a halted partition calls it when it finds
// the record, so a halt whose index entry was lost (a remover that failed
// between its steps) is listed again.
func Index(ctx context.Context, c redis.UniversalClient, handler, key string) error {
	return c.SAdd(ctx, MarksKey(handler), key).Err()
}

// RecordKey is the control hash holding r in its field MetaHalt: MetaKey
// of the partition's lease, or of the pm value's lease for a pm.
func (r HaltRecord) RecordKey() string {
	if r.PM {
		return MetaKey(PMLeaseKey(r.Handler, r.Key))
	}
	return MetaKey(LeaseKey(r.Partition, r.Handler))
}

// A halt is kept in two places: the record, in the partition's control
// hash next to its lease and streams (so writing it is fenced and
// resolving it is one script), and the handler's index of control hashes
// (MarksKey, shared with the pauses), in its own slot, which operators
// list. The record is the truth; the index is kept a superset of the
// records that exist: a writer indexes before and after it writes, and
// whoever removes a record unindexes it and then indexes it again if a
// record (or a pause) is there meanwhile (unmark), so no interleaving
// leaves a record out of the index. Index members with neither a record
// nor a pause are dropped by the listing.

// ErrBadHaltRecord means a stored halt record is not valid JSON: it can
// only be deleted (GetHalt's error names the key).
var ErrBadHaltRecord = errors.New("halt record is not valid")

// ErrBadRecord means a halt record could not be encoded: nothing was
// written, and trying again will not help.
var ErrBadRecord = errors.New("halt record cannot be encoded")

// RecordHalt writes r, fenced by l: a stale owner cannot describe a head
// that is no longer its own (ErrFenced). It returns the record as stored,
// for ClearHalt.
func RecordHalt(ctx context.Context, c redis.UniversalClient, l Lease, r HaltRecord) (raw string, err error) {
	b, err := json.Marshal(r)
	if err != nil {
		return "", fmt.Errorf("halt of %s: %w: %w", r.Partition, ErrBadRecord, err)
	}
	key, index := r.RecordKey(), MarksKey(r.Handler)
	if err := c.SAdd(ctx, index, key).Err(); err != nil {
		return "", fmt.Errorf("index halt of %s: %w", r.Partition, err)
	}
	if err := scriptRecordHalt.Run(ctx, c, []string{l.Ref.Key, key}, l.Token(), string(b)).Err(); err != nil {
		return "", fmt.Errorf("record halt of %s: %w", r.Partition, fenced(err, l))
	}
	if err := c.SAdd(ctx, index, key).Err(); err != nil {
		return "", fmt.Errorf("index halt of %s: %w", r.Partition, err)
	}
	return string(b), nil
}

// GetHalt reads and decodes the record at key (a RecordKey), with its raw
// value for ClearHalt; found is false when there is none.
func GetHalt(ctx context.Context, c redis.UniversalClient, key string) (r HaltRecord, raw string, found bool, err error) {
	raw, err = c.HGet(ctx, key, MetaHalt).Result()
	if errors.Is(err, redis.Nil) {
		return HaltRecord{}, "", false, nil
	}
	if err != nil {
		return HaltRecord{}, "", false, err
	}
	if err := json.Unmarshal([]byte(raw), &r); err != nil {
		return HaltRecord{}, raw, true, fmt.Errorf("halt record %s is not valid JSON (delete it with HDEL %s %s): %w: %w", key, key, MetaHalt, ErrBadHaltRecord, err)
	}
	return r, raw, true, nil
}

// RawHalt is a halt record with the raw value it was decoded from; Err is
// set, and HaltRecord zero, when the value is not a valid record.
type RawHalt struct {
	HaltRecord
	Raw string
	Err error
}

// Halts returns every halt record of handler, keyed by record key. With
// tidy, index members with neither a record nor a pause are dropped from
// the index (a read-only viewer leaves them).
func Halts(ctx context.Context, c redis.UniversalClient, handler string, tidy bool) (map[string]RawHalt, error) {
	keys, err := c.SMembers(ctx, MarksKey(handler)).Result()
	if err != nil {
		return nil, fmt.Errorf("list halts of %s: %w", handler, err)
	}
	out := make(map[string]RawHalt, len(keys))
	for _, key := range keys {
		r, raw, found, err := GetHalt(ctx, c, key)
		switch {
		case !found && err == nil:
			if !tidy {
				continue
			}
			if err := unmark(ctx, c, handler, key); err != nil {
				return nil, err
			}
		case err != nil && raw == "":
			return nil, fmt.Errorf("list halts of %s: %w", handler, err)
		default:
			out[key] = RawHalt{HaltRecord: r, Raw: raw, Err: err}
		}
	}
	return out, nil
}

// HaltedHandlers finds the handlers with a halt record listed in their
// index of halts and pauses (MarksKey). It scans the keyspace (on every
// primary of a cluster): an operator command, never on the consumer's
// path.
func HaltedHandlers(ctx context.Context, c redis.UniversalClient) ([]string, error) {
	keys, err := scanKeys(ctx, c, MarksKey("*"), "")
	if err != nil {
		return nil, fmt.Errorf("find handlers with halts: %w", err)
	}
	names := make([]string, len(keys))
	for i, k := range keys {
		names[i] = strings.TrimPrefix(k, MarksKey(""))
	}
	counts, err := HaltCounts(ctx, c, names)
	if err != nil {
		return nil, fmt.Errorf("find handlers with halts: %w", err)
	}
	var out []string
	for i, n := range counts {
		if n > 0 {
			out = append(out, names[i])
		}
	}
	return out, nil
}

// IsPending reports whether id is in handler's pending list on stream,
// in its group there (LaneGroup). A missing stream or group counts as not
// pending.
func IsPending(ctx context.Context, c redis.UniversalClient, stream, handler, id string) (bool, error) {
	group, err := LaneGroup(ctx, c, stream, handler)
	if err != nil {
		return false, err
	}
	ps, err := c.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: stream, Group: group, Start: id, End: id, Count: 1}).Result()
	if IsNoGroup(err) || errors.Is(err, redis.Nil) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return len(ps) == 1 && ps[0].ID == id, nil
}

// ClearHalt deletes handler's record at key only if it is still raw, so a
// newer halt of the same partition is never removed by mistake, and
// unindexes it. It reports whether it deleted.
func ClearHalt(ctx context.Context, c redis.UniversalClient, handler, key, raw string) (bool, error) {
	n, err := scriptClearHalt.Run(ctx, c, []string{key}, raw).Int64()
	if err != nil {
		return false, fmt.Errorf("remove halt record %s: %w", key, err)
	}
	if n == 1 {
		return true, unmark(ctx, c, handler, key)
	}
	return false, nil
}

// unmark removes the control hash key from handler's index (MarksKey)
// unless it holds a halt record or a pause once it has (a new halt or
// pause recorded meanwhile, or the other of the two). It runs to the end
// even when ctx is cancelled: stopping between its steps could leave a
// record out of the index.
func unmark(ctx context.Context, c redis.UniversalClient, handler, key string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	index := MarksKey(handler)
	if err := c.SRem(ctx, index, key).Err(); err != nil {
		return fmt.Errorf("unindex %s: %w", key, err)
	}
	vals, err := c.HMGet(ctx, key, MetaHalt, MetaPaused).Result()
	if err == nil && (vals[0] != nil || vals[1] != nil) {
		err = c.SAdd(ctx, index, key).Err()
	}
	if err != nil {
		return fmt.Errorf("unindex %s: %w", key, err)
	}
	return nil
}

// The refusals of ResolveHead; each carries the script's detail.
var (
	ErrResolveNotHalted = errors.New("NOT_HALTED") // the record changed since it was read
	ErrResolveRetrying  = errors.New("RETRYING")   // another owner holds the lease (detail: its token)
	// ErrResolveAttempting: the lease's owner, the halting one included,
	// is running an attempt of the head now (detail: its token). It
	// matches ErrResolveRetrying too.
	ErrResolveAttempting = fmt.Errorf("ATTEMPTING: %w", ErrResolveRetrying)
	ErrResolveStale      = errors.New("STALE")    // the entry is no longer pending
	ErrResolveNotHead    = errors.New("NOT_HEAD") // another entry is first pending (detail: its id)
)

// resolveCodes maps lib/head.lua's refusal codes to their errors.
var resolveCodes = map[string]error{
	"NOT_HALTED": ErrResolveNotHalted, "RETRYING": ErrResolveRetrying, "ATTEMPTING": ErrResolveAttempting,
	"STALE": ErrResolveStale, "NOT_HEAD": ErrResolveNotHead,
}

// ResolveError is a refusal of ResolveHead: Code is one of the
// ErrResolve* errors, Detail the script's detail.
type ResolveError struct {
	Code   error
	Detail string
}

func (e *ResolveError) Error() string { return e.Code.Error() + " " + e.Detail }
func (e *ResolveError) Unwrap() error { return e.Code }

// headReply reads the {code, detail} reply of resolve_head and
// check_head: the detail when OK, else a *ResolveError.
func headReply(reply []string) (string, error) {
	if len(reply) != 2 {
		return "", fmt.Errorf("unexpected reply %v", reply)
	}
	if code, ok := resolveCodes[reply[0]]; ok {
		return "", &ResolveError{Code: code, Detail: reply[1]}
	}
	if reply[0] != "OK" {
		return "", fmt.Errorf("unexpected reply %v", reply)
	}
	return reply[1], nil
}

// ResolvedTTL is how long the note an operator's resolve leaves for the
// halted owner (MetaResolved) lives: long enough for the owner to notice
// the deleted lease at its next renew, short enough to leave nothing.
const ResolvedTTL = 10 * time.Minute

// ResolveHead is the operator's compare-and-skip of the head r describes
// (raw is the record as read): unless the record changed, another owner
// holds the lease or the halting owner is attempting the head, or the
// entry is no longer the pending head (a *ResolveError), it copies the
// entry to dlq (when dlq is not "", followed by the dlqFields pairs),
// acks it, deletes the lease and the attempt mark, leaves the halted
// owner a note of the resolution (MetaResolved) and removes the record, in
// one script. It returns the dead-letter entry id ("" without dlq). A
// resolve whose reply was lost and that Redis ran again answers as the
// first run did (resolve_head.lua keeps the call's op in the note).
func ResolveHead(ctx context.Context, c redis.UniversalClient, handler string, r HaltRecord, raw, dlq string, dlqFields []any) (string, error) {
	key := r.RecordKey()
	keys := []string{key, r.Stream, r.LeaseKey}
	// The lease's other lanes, whose generation groups the resolve parks
	// too (a record of an earlier build may not list them: the next
	// acquire moves them then).
	for _, l := range r.Streams {
		if l != r.Stream {
			keys = append(keys, l)
		}
	}
	others := len(keys) - 3
	command := "skip"
	if dlq != "" {
		command = "dlq move"
	}
	// One op per call, made here so that every resend of the script
	// carries it: a resend that finds the head resolved by this op answers
	// as the first run did.
	args := []any{raw, r.Token, handler, r.EntryID, ResolvedTTL.Milliseconds(), command, NewOp(), others}
	if dlq != "" {
		keys = append(keys, dlq)
		args = append(args, dlqFields...)
	}
	reply, err := scriptResolveHead.Run(ctx, c, keys, args...).StringSlice()
	if err != nil {
		return "", fmt.Errorf("resolve the head %s of %s: %w", r.EntryID, r.Partition, err)
	}
	dlqID, err := headReply(reply)
	if err != nil {
		return "", err
	}
	// Resolved; a failed unindex leaves a member without a record, which
	// the next listing drops.
	unmark(ctx, c, handler, key)
	return dlqID, nil
}

// Resolution is the note resolve_head leaves for the owner whose halted
// head an operator resolved (MetaResolved).
type Resolution struct {
	Token   string `json:"token"`    // the token the lease held ("" when it was free)
	EntryID string `json:"entry_id"` // the head resolved
	Command string `json:"command"`  // "skip" or "dlq move"
	// Op is the resolve call's nonce and DLQEntryID its dead-letter copy
	// ("" for a skip): a resend of that call answers with them.
	Op         string `json:"op,omitempty"`
	DLQEntryID string `json:"dlq_id,omitempty"`
	// At is when the resolve ran, and Expires when the note stops
	// counting for a resend and for the reaper (Redis ms).
	At      int64 `json:"at,omitempty"`
	Expires int64 `json:"exp,omitempty"`
}

// Resolved reads the note an operator's resolve left at the lease (found
// false: none). A note outlives its expiry until the next resolve or the
// reaper: it names the token the lease held, which only its owner
// compares with its own.
func Resolved(ctx context.Context, c redis.UniversalClient, leaseKey string) (res Resolution, found bool, err error) {
	v, err := c.HGet(ctx, MetaKey(leaseKey), MetaResolved).Result()
	if errors.Is(err, redis.Nil) {
		return Resolution{}, false, nil
	}
	if err != nil {
		return Resolution{}, false, fmt.Errorf("read the resolved note of %s: %w", leaseKey, err)
	}
	if err := json.Unmarshal([]byte(v), &res); err != nil {
		return Resolution{}, false, fmt.Errorf("the resolved note of %s is not valid: %w", leaseKey, err)
	}
	return res, true, nil
}
