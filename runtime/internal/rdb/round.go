package rdb

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

// RoundOp is what a slice of a round does under its lease.
type RoundOp byte

// The ops of a round's slice (round.lua). Each checks the slice's lease
// first and does nothing else when it does not hold the token.
const (
	// RoundAck acks the slice's ack ids: ack.lua for many ids.
	RoundAck RoundOp = 'A'
	// RoundRead acks, then reads as FencedReadAhead (read.lua).
	RoundRead RoundOp = 'R'
	// RoundReadNew acks, then reads up to N new entries of the first lane
	// only, without the pending pass: a read sent ahead of need by an
	// owner holding entries it read and has not acked (the batched mode's
	// prefetch), which a pending pass would hand it again. It is safe to
	// run twice: its consumer's pending entries of the first lane after
	// RoundSlice.After, which only a run whose reply was lost delivered,
	// come back before anything new is read. Its entries
	// are RoundRead's for a read whose pending pass found nothing, except
	// that a later lane's are never read: More says one exists when the
	// first lane had entries, and no entries say only that the first lane
	// had nothing new (a later lane is not looked at).
	RoundReadNew RoundOp = 'N'
	// RoundReadOldest acks, then reads as FencedReadOldest
	// (read_oldest.lua).
	RoundReadOldest RoundOp = 'O'
	// RoundVerify only checks the lease, as Lease.Verify.
	RoundVerify RoundOp = 'V'
)

// RoundMaxSlices and RoundMaxKeys bound one round call. A script blocks
// Redis while it runs, so a round must stay short next to the other
// clients' commands; on a cluster a call is refused whole when its first
// slice's slot has moved or is moving (MOVED, ASK, TRYAGAIN), and every
// slice of a call that reached the wrong node fails (ErrNotLocal), so a
// larger call loses more work to one migration; and the reply, which
// carries every slice's entries, is built whole in Redis's memory before
// it is sent. The caller splits a larger round into several calls (which
// a pipeline can still carry in one round trip).
const (
	RoundMaxSlices = 32
	RoundMaxKeys   = 128
)

// RoundMaxAckIDs bounds the ack ids of one round call: round.lua passes a
// slice's ids to XACK with unpack, which Lua refuses beyond its C stack
// (a few thousand values), and every id is one more argument to parse.
const RoundMaxAckIDs = 1024

// roundHeader is how many ARGV values precede a slice's ack ids.
const roundHeader = 8

// RoundSlice is one partition's part of a round: its lease, lanes and
// group, what to do (Op), and the ids to ack first. A slice's keys share
// one slot (the key layout sees to it; BuildRound refuses a cluster
// round's slice that breaks it); on a cluster the slices of one
// call should share a node, or those not on the first slice's node fail
// with ErrNotLocal.
type RoundSlice struct {
	Op    RoundOp
	Lease Lease    // the lease key and the token it must hold (its consumer name)
	Group string   // the consumer group
	Lanes []string // RoundRead, RoundReadNew: priority order; RoundReadOldest: primaries first
	// N is, for RoundRead and RoundReadNew, how many new entries of the
	// first lane to read at most (FencedReadAhead's count; at least 1),
	// and for
	// RoundReadOldest the number of primary lanes (FencedReadOldest's
	// primaries); other ops ignore it.
	N int
	// AckLane is the lane (1-based index into Lanes) AckIDs are on, 0 when
	// the slice acks nothing; RoundVerify acks nothing.
	AckLane int
	// AckIDs are acked, in one XACK after the fence check and before the
	// read, as the ack riding on FencedRead is.
	AckIDs []string
	// After is, for RoundReadNew (and only for it), the id of the last
	// entry of the first lane the owner holds once AckIDs are acked (read
	// and not acked), or "0" when it holds none there: the entries after
	// it pending under the slice's consumer can only come from a run of
	// the same call whose reply was lost, and they are handed back again.
	After string
	// Settled says, for RoundRead and RoundReadNew, that nothing is
	// pending under the lease's consumer but the entries its owner holds
	// (AckIDs, and for RoundReadNew those up to After): the owner's last
	// read under this lease came back whole and found no pending entry
	// (Entry.Pending). Such a read of one lane on a generation group goes
	// as a plain XREADGROUP, without round.lua's pending pass (plain.go).
	// round.lua ignores it.
	Settled bool
}

// RoundResult is one slice's outcome.
type RoundResult struct {
	// Err is nil, or wraps ErrFenced when the lease did not hold the
	// token (the slice did nothing), or ErrNotLocal (on a cluster: the
	// slice did nothing), or the slice's own failure: an error reply of
	// Redis or a Lua error (a redis.Error beginning with the reply's own
	// prefix, ERR for a Lua error, so Permanent classifies it as the
	// single script's same error), after which what the slice did before
	// it (its acks) stays done.
	//
	// ErrPaused: the lease held and the partition is paused; the acks were
	// done (Acked), nothing was read, and the lease is not confirmed for
	// an attempt.
	//
	// ErrFenced is as sure as the single scripts' fence on a cluster too:
	// a slice whose lease is missing where the round ran is probed again
	// (round.lua), so a lease still on the source node of a slot
	// importing where go-redis sent the call after an ASK gives
	// ErrNotLocal, not ErrFenced.
	Err error
	// Entries and More are what FencedReadAhead (RoundRead) returns for
	// the same state, or FencedReadOldest's entry (RoundReadOldest: at
	// most one, and More is true whenever there is one, as read_oldest.lua
	// does not say); nil when every lane is drained.
	Entries []Entry
	More    bool
	// Acked is XACK's count for RoundAck, and for any op that found the
	// partition paused.
	Acked int64
}

// Fenced reports whether the slice's lease did not hold its token.
func (r RoundResult) Fenced() bool { return errors.Is(r.Err, ErrFenced) }

// BuildRound returns the KEYS and ARGV of one round.lua call carrying
// slices, in their order. On a single Redis (cluster false) every key is
// declared in KEYS. On a cluster, Redis refuses KEYS of several slots
// even to a script flagged allow-cross-slot-keys (it measured so on
// 7.0.15), so only the first slice's keys are declared (they route the
// call and are checked by Redis with the call) and the others travel at
// the end of ARGV, for RoundScript's cross-slot variant (see round.lua).
//
// It refuses a round beyond RoundMaxSlices, RoundMaxKeys or
// RoundMaxAckIDs (ErrRoundTooLarge: the caller splits it) and a malformed
// slice (on a cluster, also one whose keys do not share a slot, which
// round.lua could not tell from keys served by another node, or whose
// lease key round.lua cannot name a key of the same slot for), so the
// script's own checks of the header only guard against a defect.
func BuildRound(slices []RoundSlice, cluster bool) (keys []string, args []any, err error) {
	nk, nids := 0, 0
	for i, s := range slices {
		err := s.check()
		if err == nil && cluster {
			err = s.checkSlot()
		}
		if err != nil {
			return nil, nil, fmt.Errorf("round slice %d (%s): %w: %w", i, s.Lease.Ref.Key, errBadSlice, err)
		}
		nk += 2 + len(s.Lanes)
		nids += len(s.AckIDs)
	}
	if len(slices) > RoundMaxSlices || nk > RoundMaxKeys || nids > RoundMaxAckIDs {
		return nil, nil, fmt.Errorf("round of %d slices, %d keys, %d ack ids (at most %d, %d, %d): %w",
			len(slices), nk, nids, RoundMaxSlices, RoundMaxKeys, RoundMaxAckIDs, ErrRoundTooLarge)
	}
	declared := nk
	if cluster && len(slices) > 0 {
		declared = 2 + len(slices[0].Lanes)
	}
	keys = make([]string, 0, declared)
	args = make([]any, 0, 2+roundHeader*len(slices)+nids+nk-declared)
	args = append(args, len(slices), nk-declared)
	for i, s := range slices {
		if i == 0 || !cluster {
			keys = append(append(keys, s.Lease.Ref.Key, MetaKey(s.Lease.Ref.Key)), s.Lanes...)
		}
		args = append(args, string(s.Op), 2+len(s.Lanes), s.Lease.Token(), s.Group, s.N, s.AckLane, len(s.AckIDs), s.After)
		for _, id := range s.AckIDs {
			args = append(args, id)
		}
	}
	if declared < nk {
		for _, s := range slices[1:] {
			args = append(args, s.Lease.Ref.Key, MetaKey(s.Lease.Ref.Key))
			for _, l := range s.Lanes {
				args = append(args, l)
			}
		}
	}
	return keys, args, nil
}

// ErrNotLocal is a round slice whose keys were not all served by the
// node the round ran on (another node serves its slot; the slot is
// migrating and a key is missing, maybe gone; the slot is importing and
// a key is missing, maybe still on the source; the cluster is down):
// nothing of the slice was done, so it can go again, to the node that
// now serves the slot, after a backoff (a key that is only missing keeps
// a slice of a migrating slot ErrNotLocal until the migration ends).
// Any other refusal of the slice's keys (an ACL one) is the slice's own
// error, not ErrNotLocal.
var ErrNotLocal = errors.New("the slice's keys are not on the node the round ran on; nothing of it was done")

// errBadSlice is BuildRound's refusal of a malformed slice: a defect of
// the caller, which Permanent counts as permanent.
var errBadSlice = errors.New("malformed round slice")

// ErrRoundTooLarge is BuildRound's refusal of a round beyond the caps:
// split it into several calls.
var ErrRoundTooLarge = errors.New("round too large for one call; split it")

// check refuses a slice round.lua would refuse or misread.
func (s RoundSlice) check() error {
	switch {
	case s.Op != RoundAck && s.Op != RoundRead && s.Op != RoundReadNew && s.Op != RoundReadOldest && s.Op != RoundVerify:
		return fmt.Errorf("unknown op %q", s.Op)
	case s.Lease.Ref.Key == "":
		return errors.New("no lease key")
	case s.AckLane < 0 || s.AckLane > len(s.Lanes):
		return fmt.Errorf("ack lane %d of %d lanes", s.AckLane, len(s.Lanes))
	case (s.AckLane == 0) != (len(s.AckIDs) == 0):
		return fmt.Errorf("ack lane %d with %d ack ids", s.AckLane, len(s.AckIDs))
	case s.Op == RoundVerify && len(s.AckIDs) > 0:
		return errors.New("a verify acks nothing")
	case (s.Op == RoundRead || s.Op == RoundReadNew) && (s.N < 1 || len(s.Lanes) == 0):
		return fmt.Errorf("a read of %d entries over %d lanes", s.N, len(s.Lanes))
	case s.Op == RoundReadOldest && (s.N < 0 || s.N > len(s.Lanes)):
		return fmt.Errorf("%d primaries of %d lanes", s.N, len(s.Lanes))
	case (s.Op == RoundReadNew) != (s.After != ""):
		return fmt.Errorf("op %q with after %q: a read-new names the last entry its owner holds (\"0\": none), no other op does", s.Op, s.After)
	}
	return nil
}

// checkSlot refuses, for a cluster round, a slice whose keys do not share
// one hash slot, and one whose lease key has no hash tag but holds a '}'
// (round.lua's probe of a missing lease needs a second key of its slot:
// the lease key with a suffix, or wrapped in braces).
func (s RoundSlice) checkSlot() error {
	k := s.Lease.Ref.Key
	for _, l := range s.Lanes {
		if slot(l) != slot(k) {
			return fmt.Errorf("lane %s is in slot %d, the lease in %d", l, slot(l), slot(k))
		}
	}
	if i := strings.IndexByte(k, '{'); i >= 0 && strings.IndexByte(k[i+1:], '}') > 0 {
		return nil
	}
	if strings.IndexByte(k, '}') >= 0 {
		return errors.New("a lease key without a hash tag holding '}'")
	}
	return nil
}

// ParseRound reads round.lua's reply to the call BuildRound made of
// slices: one RoundResult per slice. The error is for a reply that does
// not match the call (a defect), never for one slice's outcome.
func ParseRound(slices []RoundSlice, reply any) ([]RoundResult, error) {
	res, _ := reply.([]any)
	if len(res) != len(slices) {
		return nil, fmt.Errorf("round of %d slices: unexpected reply %v", len(slices), reply)
	}
	out := make([]RoundResult, len(slices))
	for i, s := range slices {
		r, _ := res[i].([]any)
		status := int64(-99) // no status: an unexpected reply
		if len(r) > 0 {
			status, _ = r[0].(int64)
		}
		switch {
		case status == 0 && len(r) == 1:
			out[i].Err = fmt.Errorf("round slice %d: %s as %s: %w", i, s.Lease.Ref.Key, s.Lease.Token(), ErrFenced)
		case status == -1 && len(r) == 2:
			msg, _ := r[1].(string)
			out[i].Err = fmt.Errorf("round slice %d (%s): %w", i, s.Lease.Ref.Key, replyError(msg))
		case status == -2 && len(r) == 2:
			// Not a redis.Error: Permanent must not read the server's
			// "ERR Script attempted to access a non local key" as a
			// defect; the slot moves, and the slice goes again.
			msg, _ := r[1].(string)
			out[i].Err = fmt.Errorf("round slice %d (%s): %s: %w", i, s.Lease.Ref.Key, msg, ErrNotLocal)
		case status == 1 && len(r) == 2:
			out[i] = parseRoundSlice(i, s, r[1])
		case status == 2 && len(r) == 2:
			out[i].Acked, _ = r[1].(int64)
			out[i].Err = fmt.Errorf("round slice %d: %s: %w", i, s.Lease.Ref.Key, ErrPaused)
		default:
			out[i].Err = fmt.Errorf("round slice %d (%s): unexpected reply %v", i, s.Lease.Ref.Key, res[i])
		}
	}
	return out, nil
}

// parseRoundSlice reads the reply of a slice whose lease held: the reply
// of the single script the op stands for, read by that script's parser.
func parseRoundSlice(i int, s RoundSlice, v any) RoundResult {
	var r RoundResult
	switch s.Op {
	case RoundAck:
		r.Acked, _ = v.(int64)
	case RoundRead, RoundReadNew, RoundReadOldest:
		raw, _ := v.([]any)
		es, more, err := parseRead(s.Lanes, raw)
		if err != nil {
			r.Err = fmt.Errorf("round slice %d: fenced read of %v: %w", i, s.Lanes, err)
			break
		}
		r.Entries, r.More = es, more
	}
	return r
}

// replyError is an error reply of Redis that round.lua caught in a slice,
// carried as the error of that slice alone. It is a redis.Error, so
// Permanent and the Is* helpers classify it as they would the reply of a
// single script.
type replyError string

func (e replyError) Error() string { return string(e) }

// RedisError marks replyError as an error reply of the server.
func (replyError) RedisError() {}

// Round runs one round.lua call carrying slices and returns one result per
// slice. On a cluster client it runs the allow-cross-slot-keys variant,
// routed by the first slice's lease key: when that slot is not served by
// the node the client sends to, or is moving, Redis refuses the whole
// call (nothing is applied) and err says so (IsMoved; go-redis follows a
// MOVED or ASK itself first); another slice whose keys are not on that
// node fails alone with ErrNotLocal. err is also a call that could not
// run at all (too large, a network error); a slice's own outcome is in
// its result. At maxmemory both variants run as the single scripts do
// (the cluster one is flagged allow-oom: see crossSlotShebang), so an OOM
// error is not a round's to handle.
func Round(ctx context.Context, c redis.UniversalClient, slices []RoundSlice) ([]RoundResult, error) {
	_, cluster := c.(*redis.ClusterClient)
	keys, args, err := BuildRound(slices, cluster)
	if err != nil {
		return nil, err
	}
	if len(slices) == 0 {
		return nil, nil
	}
	res, err := RoundScript(c).Run(ctx, c, keys, args...).Result()
	if err != nil {
		return nil, fmt.Errorf("round of %d slices from %s: %w", len(slices), slices[0].Lease.Ref.Key, err)
	}
	return ParseRound(slices, res)
}

// RoundScript is the round script for c: on a cluster client the variant
// flagged allow-cross-slot-keys (a round's slices are on one node, not in
// one slot), else the plain one, which every Redis (and miniredis) runs.
func RoundScript(c redis.UniversalClient) *redis.Script {
	if _, ok := c.(*redis.ClusterClient); ok {
		return scriptRoundCrossSlot
	}
	return scriptRound
}

// IsMoved reports a call refused because a slot it names is served by
// another node or is moving (MOVED, ASK, TRYAGAIN): on a round, nothing
// was applied, and the slices are worth sending again, grouped by their
// node as the cluster now maps them.
func IsMoved(err error) bool {
	var re redis.Error
	if !errors.As(err, &re) {
		return false
	}
	msg := re.Error()
	return strings.HasPrefix(msg, "MOVED ") || strings.HasPrefix(msg, "ASK ") || strings.HasPrefix(msg, "TRYAGAIN")
}

// IsCrossSlot reports a call refused for naming keys of several slots
// where they may not be (CROSSSLOT): nothing was applied.
func IsCrossSlot(err error) bool {
	var re redis.Error
	return errors.As(err, &re) && strings.HasPrefix(re.Error(), "CROSSSLOT")
}
