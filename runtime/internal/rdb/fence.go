package rdb

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/redis/go-redis/v9"
)

// Entry is one stream entry read under a lease.
type Entry struct {
	Stream string            // lane the entry was read from
	ID     string            // stream entry id
	Fields map[string]string // nil when the entry was deleted while pending
	// Deliveries is how many times the group was handed the entry
	// (XREADGROUP, XCLAIM), this read included; 0 when unknown.
	Deliveries int64
	// Pending: FencedRead took it from the consumer's pending entries (a
	// reclaimed, retried or halted head), not from the new ones.
	Pending bool
}

// FencedRead reads the next entry for the lease's consumer (its token) in
// group: its own pending entries on every lane first (a retried, halted or
// reclaimed head), then new ones, lane by lane in the given order. ok is
// false when every lane is drained. It fails with ErrFenced when the lease
// no longer holds this token. It never blocks: Redis forbids XREADGROUP
// BLOCK inside a script.
//
// ack, when not nil, is an entry of one of the lanes to ack first, in the
// same script: the fenced ack of one entry and the read of the next in one
// call.
func FencedRead(ctx context.Context, c redis.UniversalClient, l Lease, group string, lanes []string, ack *Entry) (e Entry, ok bool, err error) {
	return first(fencedRead(ctx, scriptRead, c, l, group, lanes, 1, ack))
}

// first is the first entry of a read (ok false: none).
func first(es []Entry, _ bool, err error) (Entry, bool, error) {
	if err != nil || len(es) == 0 {
		return Entry{}, false, err
	}
	return es[0], true, nil
}

// FencedReadAhead is FencedRead reading up to count new entries of the
// first lane at once (every other read takes one entry); nil when every
// lane is drained. The entries after the first are read ahead: pending
// under the lease's consumer, one delivery counted each, so one read ahead
// and never run counts one delivery more than the handlers it reached.
// The caller must run them in order and ack each one (FencedAck, or as the
// ack of the next read) before running the next: that ack is the fence of
// the one after it.
//
// more is false when the read saw nothing after what it returned: fewer
// new entries than count on the first lane and no other lane, so the
// caller may ack its last entry alone and wait for a signal instead of
// reading again.
func FencedReadAhead(ctx context.Context, c redis.UniversalClient, l Lease, group string, lanes []string, count int, ack *Entry) (es []Entry, more bool, err error) {
	return fencedRead(ctx, scriptRead, c, l, group, lanes, count, ack)
}

// FencedReadOldest reads the next entry for a pm's owner across the lanes
// of its correlation value: the one with the oldest entry id among the
// first primaries lanes, or among the others (backfill) when those are
// drained. Like FencedRead, the owner's pending entries on every lane come
// before any new entry, it fails with ErrFenced when the lease no longer
// holds, and it never blocks. Only the returned entry is delivered: the
// other lanes' next entries are looked at without being delivered, so an
// entry is pending only while it is in flight.
// ack is acked first, as in FencedRead.
func FencedReadOldest(ctx context.Context, c redis.UniversalClient, l Lease, group string, lanes []string, primaries int, ack *Entry) (e Entry, ok bool, err error) {
	return first(fencedRead(ctx, scriptReadOldest, c, l, group, lanes, primaries, ack))
}

// fencedRead runs a fenced read script, whose reply is {0} when every
// lane is drained or {lane (1-based), entries, deliveries of the first,
// 1 when the first came from the pending pass, 0 when nothing more was
// there} (more is true when the reply does not say).
func fencedRead(ctx context.Context, script *redis.Script, c redis.UniversalClient, l Lease, group string, lanes []string, arg int, ack *Entry) ([]Entry, bool, error) {
	keys := append([]string{l.Ref.Key, MetaKey(l.Ref.Key)}, lanes...)
	ackLane, ackID := 0, ""
	if ack != nil {
		ackLane, ackID = slices.Index(lanes, ack.Stream)+1, ack.ID
		if ackLane == 0 {
			return nil, false, fmt.Errorf("fenced read of %v: the entry to ack is on %s, not one of the lanes", lanes, ack.Stream)
		}
	}
	res, err := script.Run(ctx, c, keys, l.Token(), group, arg, ackLane, ackID).Slice()
	if err != nil {
		return nil, false, fmt.Errorf("fenced read of %v: %w", lanes, fenced(err, l))
	}
	es, more, err := parseRead(lanes, res)
	if err != nil {
		return nil, false, fmt.Errorf("fenced read of %v: %w", lanes, err)
	}
	return es, more, nil
}

// parseRead reads the reply of a fenced read over lanes (read.lua,
// read_oldest.lua, or a round's read slice: see fencedRead).
func parseRead(lanes []string, res []any) ([]Entry, bool, error) {
	if len(res) == 0 {
		return nil, false, fmt.Errorf("unexpected reply %v", res)
	}
	lane, _ := res[0].(int64)
	if lane == 0 {
		return nil, false, nil
	}
	if lane < 1 || int(lane) > len(lanes) || len(res) < 2 {
		return nil, false, fmt.Errorf("unexpected reply %v", res)
	}
	raw, _ := res[1].([]any)
	if len(raw) == 0 {
		return nil, false, fmt.Errorf("unexpected reply %v", res)
	}
	es := make([]Entry, len(raw))
	for i, v := range raw {
		e, err := parseEntry(v)
		if err != nil {
			return nil, false, err
		}
		// Entries after the first are new ones read ahead: when they run
		// it is their first time.
		e.Stream, e.Deliveries = lanes[lane-1], 1
		es[i] = e
	}
	if len(res) > 2 {
		es[0].Deliveries, _ = res[2].(int64)
	}
	if len(res) > 3 {
		pending, _ := res[3].(int64)
		es[0].Pending = pending == 1
	}
	more := true
	if len(res) > 4 {
		n, _ := res[4].(int64)
		more = n == 1
	}
	return es, more, nil
}

// FencedAck acks id on stream in group if the lease still holds its token.
func FencedAck(ctx context.Context, c redis.UniversalClient, l Lease, group, stream, id string) error {
	if err := scriptAck.Run(ctx, c, []string{l.Ref.Key, stream, MetaKey(l.Ref.Key)}, l.Token(), group, id).Err(); err != nil {
		return fmt.Errorf("fenced ack of %s %s: %w", stream, id, fenced(err, l))
	}
	return nil
}

// ReadFlags say how the Batcher sends a read.
type ReadFlags struct {
	// Urgent: the partition's last read was full (more is waiting than one
	// read returns), so its call goes before the others queued.
	Urgent bool
	// Settled: nothing is pending under the lease's consumer but what its
	// owner holds (RoundSlice.Settled), so a read on a generation group
	// may go as a plain XREADGROUP.
	Settled bool
}

// ReadAhead is FencedReadAhead in the Batcher's next round, acking acks
// first (entries of one lane; none: nil).
func (b *Batcher) ReadAhead(ctx context.Context, l Lease, group string, lanes []string, count int, acks []Entry, f ReadFlags) ([]Entry, bool, error) {
	s := RoundSlice{Op: RoundRead, Lease: l, Group: group, Lanes: lanes, N: count, Settled: f.Settled}
	if err := s.ack(acks); err != nil {
		return nil, false, fmt.Errorf("fenced read of %v: %w", lanes, err)
	}
	r, err := b.run(ctx, s, f.Urgent)
	if err == nil {
		err = r.Err
	}
	if err != nil {
		return nil, false, fmt.Errorf("fenced read of %v: %w", lanes, err)
	}
	return r.Entries, r.More, nil
}

// Prefetch is a read sent ahead of need (ReadNew) whose reply the caller
// takes later (Wait).
type Prefetch struct {
	b     *Batcher
	cl    *batchCall
	lanes []string
	err   error // refused before it was sent
}

// ReadNew starts a read of up to count new entries of lanes' first lane,
// acking acks first, without the pending pass (RoundReadNew): the
// batched mode's prefetch, sent while the owner still holds entries it
// read and has not run or acked. held are those entries, acks excluded;
// the newest of the first lane bounds what a resent run hands back
// (RoundSlice.After). The caller must not send another call for the
// partition before Wait returns, so its acks land in order. settled as
// ReadFlags.Settled.
func (b *Batcher) ReadNew(l Lease, group string, lanes []string, count int, acks, held []Entry, settled bool) *Prefetch {
	after := "0"
	for _, e := range held {
		if e.Stream == lanes[0] && (after == "0" || idLess(after, e.ID)) {
			after = e.ID
		}
	}
	s := RoundSlice{Op: RoundReadNew, Lease: l, Group: group, Lanes: lanes, N: count, After: after, Settled: settled}
	if err := s.ack(acks); err != nil {
		return &Prefetch{err: err, lanes: lanes}
	}
	return &Prefetch{b: b, cl: b.start(s, true), lanes: lanes}
}

// Ready reports whether Wait would return at once.
func (f *Prefetch) Ready() bool {
	if f.cl == nil {
		return true
	}
	select {
	case <-f.cl.done:
		// Put back for Wait, which takes it again.
		f.cl.done <- struct{}{}
		return true
	default:
		return false
	}
}

// Wait returns what the read returned: FencedReadAhead's entries and more
// for a read whose pending pass found nothing (see RoundReadNew).
func (f *Prefetch) Wait(ctx context.Context) ([]Entry, bool, error) {
	err := f.err
	var r RoundResult
	if err == nil {
		// The call goes back to the pool once answered: forget it.
		cl := f.cl
		f.cl, f.err = nil, errors.New("the prefetch was already taken")
		if r, err = f.b.wait(ctx, cl); err == nil {
			err = r.Err
		}
	}
	if err != nil {
		return nil, false, fmt.Errorf("fenced read ahead of %v: %w", f.lanes, err)
	}
	return r.Entries, r.More, nil
}

// ReadOldest is FencedReadOldest in the Batcher's next round, acking acks
// first as ReadAhead does.
func (b *Batcher) ReadOldest(ctx context.Context, l Lease, group string, lanes []string, primaries int, acks []Entry) (Entry, bool, error) {
	if 2+len(lanes) > RoundMaxKeys && len(acks) <= 1 {
		// More lanes than a round holds (a pm of 64 categories or more):
		// read_oldest.lua, a call of its own, has no cap.
		var ack *Entry
		if len(acks) == 1 {
			ack = &acks[0]
		}
		return FencedReadOldest(ctx, b.c, l, group, lanes, primaries, ack)
	}
	s := RoundSlice{Op: RoundReadOldest, Lease: l, Group: group, Lanes: lanes, N: primaries}
	if err := s.ack(acks); err != nil {
		return Entry{}, false, fmt.Errorf("fenced read of %v: %w", lanes, err)
	}
	r, err := b.run(ctx, s, false)
	if err == nil {
		err = r.Err
	}
	if err != nil {
		return Entry{}, false, fmt.Errorf("fenced read of %v: %w", lanes, err)
	}
	if len(r.Entries) == 0 {
		return Entry{}, false, nil
	}
	return r.Entries[0], true, nil
}

// Ack is FencedAck in the Batcher's next round. urgent as for ReadAhead.
func (b *Batcher) Ack(ctx context.Context, l Lease, group, stream, id string, urgent bool) error {
	return b.AckEntries(ctx, l, group, []Entry{{Stream: stream, ID: id}}, urgent)
}

// AckEntries acks ens, entries of one lane, in one XACK fenced by the
// lease, in the Batcher's next round. urgent as for ReadAhead.
func (b *Batcher) AckEntries(ctx context.Context, l Lease, group string, ens []Entry, urgent bool) error {
	s, err := ackSlice(l, group, ens)
	if err == nil {
		var r RoundResult
		if r, err = b.run(ctx, s, urgent); err == nil {
			err = r.Err
		}
	}
	if err != nil {
		return fmt.Errorf("fenced ack of %d entries of %s through %s: %w", len(ens), ens[0].Stream, ens[len(ens)-1].ID, err)
	}
	return nil
}

// FencedAckEntries is AckEntries in a call of its own, as FencedAck.
func FencedAckEntries(ctx context.Context, c redis.UniversalClient, l Lease, group string, ens []Entry) error {
	s, err := ackSlice(l, group, ens)
	if err == nil {
		var rs []RoundResult
		if rs, err = Round(ctx, c, []RoundSlice{s}); err == nil {
			err = rs[0].Err
		}
	}
	if err != nil {
		return fmt.Errorf("fenced ack of %d entries of %s through %s: %w", len(ens), ens[0].Stream, ens[len(ens)-1].ID, err)
	}
	return nil
}

// ackSlice is the round slice acking ens (at least one, of one lane).
func ackSlice(l Lease, group string, ens []Entry) (RoundSlice, error) {
	if len(ens) == 0 {
		return RoundSlice{}, errors.New("no entry to ack")
	}
	s := RoundSlice{Op: RoundAck, Lease: l, Group: group, Lanes: []string{ens[0].Stream}}
	return s, s.ack(ens)
}

// Verify is Lease.Verify in the Batcher's next round.
func (b *Batcher) Verify(ctx context.Context, l Lease) error {
	r, err := b.run(ctx, RoundSlice{Op: RoundVerify, Lease: l}, true)
	if err == nil {
		err = r.Err
	}
	if err != nil {
		return fmt.Errorf("verify lease %s: %w", l.Ref.Key, err)
	}
	return nil
}

// ack sets s to ack ens first (none: nothing), entries of one of s's
// lanes.
func (s *RoundSlice) ack(ens []Entry) error {
	if len(ens) == 0 {
		return nil
	}
	lane := slices.Index(s.Lanes, ens[0].Stream) + 1
	if lane == 0 {
		return fmt.Errorf("the entry to ack is on %s, not one of the lanes", ens[0].Stream)
	}
	ids := make([]string, len(ens))
	for i, en := range ens {
		if en.Stream != ens[0].Stream {
			return fmt.Errorf("the entries to ack are on %s and %s; one call acks one lane's", ens[0].Stream, en.Stream)
		}
		ids[i] = en.ID
	}
	s.AckLane, s.AckIDs = lane, ids
	return nil
}

// Reclaim moves every pending entry of group on the lanes to the lease's
// consumer (XAUTOCLAIM), so a new owner applies its predecessors' in-flight
// entries first, in stream order, and deletes the emptied consumers of past
// generations. It creates the groups (from id 0) where missing.
func Reclaim(ctx context.Context, c redis.UniversalClient, l Lease, group string, lanes []string) (int64, error) {
	keys := append([]string{l.Ref.Key}, lanes...)
	n, err := scriptReclaim.Run(ctx, c, keys, l.Token(), group).Int64()
	if err != nil {
		return 0, fmt.Errorf("reclaim %v: %w", lanes, fenced(err, l))
	}
	return n, nil
}

func parseEntry(v any) (Entry, error) {
	pair, _ := v.([]any)
	if len(pair) != 2 {
		return Entry{}, fmt.Errorf("unexpected stream entry %v", v)
	}
	id, _ := pair[0].(string)
	e := Entry{ID: id}
	kv, _ := pair[1].([]any)
	if pair[1] == nil {
		return e, nil
	}
	e.Fields = make(map[string]string, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		k, _ := kv[i].(string)
		val, _ := kv[i+1].(string)
		e.Fields[k] = val
	}
	return e, nil
}
