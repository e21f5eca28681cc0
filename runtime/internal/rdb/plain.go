package rdb

import (
	"context"
	"errors"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// A round slice whose lease reads through its generation's own consumer
// group (Lease.GenGroups) needs no script for its common ops. The group
// fences a stale owner once a successor took the partition (only a fenced
// script creates a generation's group, and every script that ends or
// moves the lease destroys it, so the stale owner's XACK acks nothing
// and its XREADGROUP fails with NOGROUP); while a lapsed or deleted lease
// has no successor yet the group still takes its acks, of entries it ran
// and nobody else can have run meanwhile, and the GET below fences it.
// The Batcher sends such a slice as plain commands in the pipeline that
// carries the rounds:
//
//	GET lease                  the confirmation: it holds the token
//	XACK lane group ids...     must ack every id
//	HGET control paused        the operator's pause: must be missing
//	XPENDING lane group (after + 1 token
//	                           reads: nothing pending after what the
//	                           owner holds (after: RoundSlice.After, or
//	                           every entry for RoundRead, whose owner
//	                           holds none once its acks are done)
//	XREADGROUP GROUP group token COUNT n STREAMS lane >
//	EXISTS backfill            reads of a partition with a backfill lane
//
// Only a clean answer is taken: the token, every id acked, no pause,
// nothing pending unseen, a read that did not fail (and for RoundRead one
// that found entries, or no backfill lane to read next). Anything else (fenced, paused,
// an ack of fewer ids, a NOGROUP, a redirection, and a run of the
// pipeline that is not its first: go-redis resends a pipeline whose reply
// it lost, a proxy may replay one, and the first run's ack and read show
// as fewer ids acked and entries pending unseen) sends the same slice
// again as round.lua's, which decides it under the fence and hands back,
// before anything new, what the plain read delivered (read.lua's pending
// pass; read_new's entries after After). So the plain path only ever
// answers what round.lua would have. The entries a plain read delivered
// in a pipeline whose answer was not clean get that delivery back
// (giveBack), so a pause does not count toward MaxDeliveries.
//
// A plain read skips round.lua's pending pass, so it goes only where
// nothing is pending under the owner's consumer but what the owner knows
// of (RoundSlice.Settled: on the backfill lane, which a plain read never
// reads, this is what keeps it so), and only on the lanes of a keyed
// partition (its stream, its backfill lane).

// plainOK reports whether s may go as plain commands.
func plainOK(s RoundSlice) bool {
	if s.check() != nil {
		return false // round.lua's call refuses it, as BuildRound does
	}
	switch s.Op {
	case RoundVerify:
		return true // a GET and an HGET: no group involved
	case RoundAck:
		return s.onGenGroup()
	case RoundRead, RoundReadNew:
		return s.Settled && len(s.Lanes) <= 2 && s.onGenGroup()
	}
	return false
}

// onGenGroup reports whether s reads and acks through its lease's
// generation group.
func (s RoundSlice) onGenGroup() bool {
	return s.Lease.GenGroups && s.Lease.Generation > 0 && s.Group == s.Lease.ReadGroup()
}

// plainCmds are one slice's plain commands in a pipeline.
type plainCmds struct {
	token   string
	get     *redis.StringCmd
	ack     *redis.IntCmd // nil: no ids
	pause   *redis.StringCmd
	pending *redis.XPendingExtCmd // reads only
	read    *redis.Cmd            // nil: not a read
	later   *redis.IntCmd         // nil: no lane after the first
}

// queuePlain adds s's plain commands to pipe.
func queuePlain(ctx context.Context, pipe redis.Pipeliner, s RoundSlice) plainCmds {
	p := plainCmds{token: s.Lease.Token()}
	p.get = pipe.Get(ctx, s.Lease.Ref.Key)
	if len(s.AckIDs) > 0 {
		p.ack = pipe.XAck(ctx, s.Lanes[s.AckLane-1], s.Group, s.AckIDs...)
	}
	p.pause = pipe.HGet(ctx, MetaKey(s.Lease.Ref.Key), MetaPaused)
	if s.Op == RoundRead || s.Op == RoundReadNew {
		start := "-"
		if s.Op == RoundReadNew {
			start = "(" + s.After
		}
		p.pending = pipe.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: s.Lanes[0], Group: s.Group, Start: start, End: "+", Count: 1, Consumer: p.token})
		p.read = pipe.Do(ctx, "XREADGROUP", "GROUP", s.Group, p.token, "COUNT", strconv.Itoa(s.N), "STREAMS", s.Lanes[0], ">")
		if len(s.Lanes) > 1 {
			p.later = pipe.Exists(ctx, s.Lanes[1:]...)
		}
	}
	return p
}

// judge returns s's result from p's replies, or ok false when they are
// not a clean answer and the slice must go again as round.lua's; then
// delivered are the ids of the entries of s's first lane its read
// delivered, whose delivery goes back (giveBack) before round.lua runs.
func (p plainCmds) judge(s RoundSlice) (r RoundResult, ok bool, delivered []string) {
	r, ok = p.clean(s)
	if ok || p.read == nil {
		return r, ok, nil
	}
	if v, err := p.read.Result(); err == nil {
		if es, err := parsePlainRead(s.Lanes[0], v); err == nil {
			for _, e := range es {
				delivered = append(delivered, e.ID)
			}
		}
	}
	return RoundResult{}, false, delivered
}

// clean is judge's answer when every reply is a clean one.
func (p plainCmds) clean(s RoundSlice) (r RoundResult, ok bool) {
	if v, err := p.get.Result(); err != nil || v != p.token {
		return r, false
	}
	if p.ack != nil {
		n, err := p.ack.Result()
		if err != nil || n != int64(len(s.AckIDs)) {
			return r, false
		}
		r.Acked = n
	}
	if err := p.pause.Err(); !errors.Is(err, redis.Nil) {
		return r, false // paused, or the check failed
	}
	if p.read == nil {
		return r, true
	}
	if ps, err := p.pending.Result(); err != nil || len(ps) > 0 {
		return r, false // delivered by an earlier run of this pipeline
	}
	later := false
	if p.later != nil {
		n, err := p.later.Result()
		if err != nil {
			return r, false
		}
		later = n > 0
	}
	v, err := p.read.Result()
	if errors.Is(err, redis.Nil) {
		// Nothing new on the first lane: round.lua's RoundRead reads a
		// backfill lane next; RoundReadNew says nothing of it.
		return r, s.Op == RoundReadNew || !later
	}
	if err != nil {
		return r, false
	}
	es, err := parsePlainRead(s.Lanes[0], v)
	if err != nil {
		return r, false
	}
	r.Entries, r.More = es, len(es) >= s.N || later
	return r, true
}

// giveBack queues the return of the delivery a plain read of s counted
// for ids, entries of s's first lane pending under its consumer that its
// owner never saw (the read's answer was not clean): XCLAIM to the same
// consumer with RETRYCOUNT 0 (a '>' read counted them 1), so the read
// that hands them over, round.lua's pending pass, which counts one,
// finds them delivered once, and a pause costs no entry a delivery
// toward MaxDeliveries. It goes only where a pending pass is what hands
// them over: before a read's fallback (round.lua's R), and after a
// read-new's only when that did not hand them over (giveBackUnseen),
// since read-new's hand-back counts nothing. Run twice it sets the same
// count. When a successor destroyed the group meanwhile it fails with
// NOGROUP and changes nothing (the successor carried the count: one
// delivery more, as for any entry read and not run by a stale owner).
// What a run of the pipeline whose reply was lost delivered is not
// given back: those entries count one delivery more.
func giveBack(ctx context.Context, pipe redis.Pipeliner, s RoundSlice, ids []string) {
	args := make([]any, 0, 8+len(ids))
	args = append(args, "XCLAIM", s.Lanes[0], s.Group, s.Lease.Token(), "0")
	for _, id := range ids {
		args = append(args, id)
	}
	args = append(args, "RETRYCOUNT", "0", "JUSTID")
	pipe.Do(ctx, args...)
}

// parsePlainRead reads XREADGROUP's reply for one stream: a map of the
// stream to its entries (RESP3) or a list of one [stream, entries] pair
// (RESP2). Every entry is new: its first delivery.
func parsePlainRead(lane string, v any) ([]Entry, error) {
	var raw []any
	switch x := v.(type) {
	case map[any]any:
		if len(x) != 1 {
			return nil, errors.New("unexpected XREADGROUP reply")
		}
		for _, es := range x {
			raw, _ = es.([]any)
		}
	case []any:
		if len(x) != 1 {
			return nil, errors.New("unexpected XREADGROUP reply")
		}
		pair, _ := x[0].([]any)
		if len(pair) != 2 {
			return nil, errors.New("unexpected XREADGROUP reply")
		}
		raw, _ = pair[1].([]any)
	default:
		return nil, errors.New("unexpected XREADGROUP reply")
	}
	if len(raw) == 0 {
		return nil, nil
	}
	es := make([]Entry, len(raw))
	for i, x := range raw {
		e, err := parseEntry(x)
		if err != nil {
			return nil, err
		}
		e.Stream, e.Deliveries = lane, 1
		es[i] = e
	}
	return es, nil
}
