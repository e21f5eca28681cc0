package inspect

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seqby/seqby/runtime/internal/rdb"
)

// Inspector reads and resolves halted partitions through a Redis client.
// It is safe for concurrent use.
type Inspector struct {
	c redis.UniversalClient
	// backfill is the engines' BackfillSuffix: the lane Inspect and
	// Partitions read next to each partition stream.
	backfill string
	// verifyBound is the engines' VerifyBound, which Pause waits out
	// (0: the default).
	verifyBound time.Duration
	// handlers keeps KnownHandlers' answer (WithHandlerCache); nil:
	// every call reads it.
	handlers *handlerCache
	// readOnly: the listings leave what they find stale (ReadOnly).
	readOnly bool
}

// ReadOnly returns a copy of i whose reads write nothing: by default a
// listing tidies up what it finds stale (Halts and Inspect remove a halt
// record whose head is no longer pending, Paused the listing of a pause
// mark that is gone), which a viewer without write access must not do.
// Stale records are still left out of the answers (Inspect reports
// Stale). The operator actions (Skip, Pause, ...) are unchanged.
func (i *Inspector) ReadOnly() *Inspector {
	j := *i
	j.readOnly = true
	return &j
}

// New returns an Inspector on c (a client, failover client or cluster
// client).
func New(c redis.UniversalClient) *Inspector { return &Inspector{c: c} }

// WithBackfillSuffix returns a copy of i that reads the backfill lanes
// named by suffix, the engines' Options.BackfillSuffix when it is not the
// default ("backfill"); Inspect and Partitions count a partition's
// entries on its stream and that lane.
func (i *Inspector) WithBackfillSuffix(suffix string) *Inspector {
	out := *i
	out.backfill = suffix
	return &out
}

func (i *Inspector) backfillSuffix() string {
	if i.backfill == "" {
		return rdb.DefaultBackfillSuffix
	}
	return i.backfill
}

// Handlers returns the handlers that have halt records, sorted. It scans
// the keyspace (on every primary of a cluster): an operator's call, never
// for a consumer's hot path.
func (i *Inspector) Handlers(ctx context.Context) ([]string, error) {
	return rdb.HaltedHandlers(ctx, i.c)
}

// Halts returns the halted partitions of handler (of every handler when
// handler is ""), sorted by handler and partition. A record whose head is
// no longer pending is stale (the partition moved on) and is removed, not
// returned, so a listed partition is really stuck on the listed entry.
func (i *Inspector) Halts(ctx context.Context, handler string) ([]HaltRecord, error) {
	handlers := []string{handler}
	if handler == "" {
		var err error
		if handlers, err = i.Handlers(ctx); err != nil {
			return nil, err
		}
	}
	out := []HaltRecord{}
	for _, h := range handlers {
		all, err := rdb.Halts(ctx, i.c, h, !i.readOnly)
		if err != nil {
			return nil, err
		}
		for field, r := range all {
			if r.Err != nil {
				return nil, r.Err
			}
			pending, err := rdb.IsPending(ctx, i.c, r.Stream, h, r.EntryID)
			if err != nil {
				return nil, fmt.Errorf("check halt record %s of %s: %w", field, h, err)
			}
			if !pending {
				if !i.readOnly {
					rdb.ClearHalt(ctx, i.c, h, field, r.Raw)
				}
				continue
			}
			out = append(out, HaltRecord(r.HaltRecord))
		}
	}
	sort.Slice(out, func(a, b int) bool {
		if out[a].Handler != out[b].Handler {
			return out[a].Handler < out[b].Handler
		}
		return out[a].Partition < out[b].Partition
	})
	return out, nil
}

// findHalt resolves partition (a record's field, the stream holding its
// head, or for a pm any stream of its correlation value) to its halt
// record and the record's raw value.
func (i *Inspector) findHalt(ctx context.Context, handler, partition string) (rdb.HaltRecord, string, error) {
	for _, key := range []string{rdb.MetaKey(rdb.LeaseKey(partition, handler)), rdb.MetaKey(rdb.PMLeaseKey(handler, partition))} {
		r, raw, found, err := rdb.GetHalt(ctx, i.c, key)
		if err != nil {
			return rdb.HaltRecord{}, "", err
		}
		if found && r.Handler == handler && r.Partition == partition {
			return r, raw, nil
		}
	}
	if _, key, ok := rdb.ParsePartitionStream(partition); ok {
		// A pm halted on its value's entry of another category: the
		// stream given is one of the value's lanes all the same.
		r, raw, found, err := rdb.GetHalt(ctx, i.c, rdb.MetaKey(rdb.PMLeaseKey(handler, key)))
		if err != nil {
			return rdb.HaltRecord{}, "", err
		}
		if found && r.Handler == handler && r.PM && r.Partition == key && slices.Contains(r.Streams, partition) {
			return r, raw, nil
		}
	}
	all, err := rdb.Halts(ctx, i.c, handler, !i.readOnly)
	if err != nil {
		return rdb.HaltRecord{}, "", err
	}
	for _, r := range all {
		if r.Err == nil && r.Stream == partition {
			return r.HaltRecord, r.Raw, nil
		}
	}
	return rdb.HaltRecord{}, "", fmt.Errorf("%s of handler %s: %w", partition, handler, ErrNotHalted)
}

// Inspect describes a partition of handler: its halt record (if halted),
// lease, streams with the group's pending entries, and the head entry with
// its fields. Without a halt record, partition is taken as a partition
// stream category:{key}: a keyed handler's, with its lease and its
// backfill lane, or a sequential pm's correlation value key, with the
// pm's lease on the value and the value's streams in every category the
// pm reads (Inspection.PM). Redis does not record a handler's kind, so
// Inspect tells them by the keys each leaves: a pm's when the pm's lease
// on key is held, or when neither lease is held and only the pm's
// generation counter or state exists (a partition neither kind ever
// leased reads as keyed, its lease free). A pm's bare correlation value
// can be inspected only while it is halted.
func (i *Inspector) Inspect(ctx context.Context, handler, partition string) (Inspection, error) {
	c := i.c
	in := Inspection{Handler: handler, Partition: partition}
	r, raw, err := i.findHalt(ctx, handler, partition)
	switch {
	case err == nil:
		pending, err := rdb.IsPending(ctx, c, r.Stream, handler, r.EntryID)
		if err != nil {
			return in, fmt.Errorf("inspect %s: %w", partition, err)
		}
		if pending {
			hr := HaltRecord(r)
			in.Halt = &hr
		} else {
			if !i.readOnly {
				rdb.ClearHalt(ctx, c, handler, r.RecordKey(), raw)
			}
			in.Stale = true
		}
		in.Partition, in.LeaseKey, in.PM = r.Partition, r.LeaseKey, r.PM
		in.Lanes = lanesOf(r.Streams)
	case errors.Is(err, ErrNotHalted):
		cat, key, ok := rdb.ParsePartitionStream(partition)
		if ok {
			if in.PM, err = i.pmLayout(ctx, handler, partition, key); err != nil {
				return in, fmt.Errorf("inspect %s: %w", partition, err)
			}
		}
		if !in.PM {
			in.LeaseKey = rdb.LeaseKey(partition, handler)
			in.Lanes = lanesOf([]string{partition, rdb.SubStream(partition, i.backfillSuffix())})
			break
		}
		// The pm's lease covers key's stream in each of its categories,
		// and their backfill lanes, as the engine's pm reader reads them.
		cats, err := i.categories(ctx, handler, cat)
		if err != nil {
			return in, fmt.Errorf("inspect %s: %w", partition, err)
		}
		var lanes []string
		for _, c := range cats {
			lanes = append(lanes, rdb.PartitionStream(c, key))
		}
		for _, c := range cats {
			lanes = append(lanes, rdb.BackfillStream(c, key, i.backfillSuffix()))
		}
		in.Partition, in.LeaseKey, in.Lanes = key, rdb.PMLeaseKey(handler, key), lanesOf(lanes)
	default:
		return in, fmt.Errorf("inspect %s: %w", partition, err)
	}
	if in.Lease, in.LeaseTTL, err = rdb.LeaseHolder(ctx, c, in.LeaseKey); err != nil {
		return in, fmt.Errorf("inspect %s: lease: %w", partition, err)
	}
	for j := range in.Lanes {
		if err := inspectLane(ctx, c, handler, &in.Lanes[j]); err != nil {
			return in, fmt.Errorf("inspect %s: %w", in.Lanes[j].Stream, err)
		}
	}
	stream, id := "", ""
	if in.Halt != nil {
		stream, id = in.Halt.Stream, in.Halt.EntryID
	} else {
		for _, l := range in.Lanes {
			if len(l.Pending) > 0 {
				stream, id = l.Stream, l.Pending[0].ID
				break
			}
		}
	}
	if id != "" {
		en, err := rdb.EntryAt(ctx, c, stream, id)
		if err != nil {
			return in, fmt.Errorf("inspect %s: read head %s: %w", stream, id, err)
		}
		head := Entry{Stream: en.Stream, ID: en.ID, Fields: en.Fields}
		in.Head = &head
	}
	return in, nil
}

// pmLayout reports whether handler consumes the partition stream of key
// as a sequential pm's correlation value, from the keys each kind leaves
// (see Inspect): a held lease decides, then the keyed lease's control
// hash, then the pm's state (its lease's control hash).
func (i *Inspector) pmLayout(ctx context.Context, handler, stream, key string) (bool, error) {
	// Every key has key's hash tag: one slot.
	var keyedLease, pmLease *redis.StringCmd
	var keyedGen, pmKeys *redis.IntCmd
	// Each command's error is read below (a missing lease is redis.Nil).
	_, _ = i.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		keyedLease = p.Get(ctx, rdb.LeaseKey(stream, handler))
		pmLease = p.Get(ctx, rdb.PMLeaseKey(handler, key))
		keyedGen = p.Exists(ctx, rdb.MetaKey(rdb.LeaseKey(stream, handler)))
		pmKeys = p.Exists(ctx, rdb.StateKey(handler, key))
		return nil
	})
	for _, cmd := range []redis.Cmder{keyedLease, pmLease, keyedGen, pmKeys} {
		if err := cmd.Err(); err != nil && !errors.Is(err, redis.Nil) {
			return false, fmt.Errorf("tell a keyed handler's partition from a pm's value by their keys: %w", err)
		}
	}
	switch {
	case keyedLease.Val() != "":
		return false, nil
	case pmLease.Val() != "":
		return true, nil
	case keyedGen.Val() > 0:
		return false, nil
	}
	return pmKeys.Val() > 0, nil
}

// categories are the categories handler reads, from the groups registry;
// just cat when the registry does not list it.
func (i *Inspector) categories(ctx context.Context, handler, cat string) ([]string, error) {
	hs, err := i.KnownHandlers(ctx)
	if err != nil {
		return nil, err
	}
	for _, h := range hs {
		if h.Name == handler && slices.Contains(h.Categories, cat) {
			return h.Categories, nil
		}
	}
	return []string{cat}, nil
}

func lanesOf(streams []string) []LaneInfo {
	out := make([]LaneInfo, len(streams))
	for i, s := range streams {
		out[i] = LaneInfo{Stream: s, Pending: []PendingEntry{}}
	}
	return out
}

func inspectLane(ctx context.Context, c redis.UniversalClient, group string, l *LaneInfo) error {
	lane, err := rdb.LaneOf(ctx, c, l.Stream, group, 100)
	if err != nil {
		return err
	}
	l.Exists, l.Length = lane.Exists, lane.Length
	for _, p := range lane.Pending {
		l.Pending = append(l.Pending, PendingEntry(p))
	}
	return nil
}

// Skip resolves a halted partition by acknowledging its head id without
// applying it. In one script it checks that the halt record is unchanged,
// that no other owner is retrying the head (ErrRetrying), and that id is
// still the group's first pending entry on the head's stream (ErrNotHead);
// then it acks the entry, removes the record and deletes the lease. The
// halted owner's next renew fails, it abandons the partition, and the next
// owner claims it at a new generation and continues with the entry after
// the head. The handler never sees the skipped message again.
func (i *Inspector) Skip(ctx context.Context, handler, partition, id string) (Resolution, error) {
	return i.resolveHead(ctx, handler, partition, id, false, false)
}

// CheckSkip runs Skip's checks, in one script like Skip's, and returns
// the Resolution Skip would make now, or the error it would refuse with;
// it changes nothing (a stale record is not removed either): an
// operator's dry run.
func (i *Inspector) CheckSkip(ctx context.Context, handler, partition, id string) (Resolution, error) {
	return i.resolveHead(ctx, handler, partition, id, false, true)
}

// MoveToDLQ is Skip that first appends a copy of the head to the
// partition's dead-letter stream (HaltRecord.DLQ, "category:{key}:dlq"
// of the head's category): the entry's fields, then dlq_stream,
// dlq_entry_id, dlq_handler, dlq_partition, dlq_reason and dlq_error. The
// copy, the ack and the lease deletion are one atomic step.
func (i *Inspector) MoveToDLQ(ctx context.Context, handler, partition, id string) (Resolution, error) {
	return i.resolveHead(ctx, handler, partition, id, true, false)
}

// CheckMoveToDLQ is CheckSkip for MoveToDLQ: Resolution.DLQ names the
// dead-letter stream the head would be copied to.
func (i *Inspector) CheckMoveToDLQ(ctx context.Context, handler, partition, id string) (Resolution, error) {
	return i.resolveHead(ctx, handler, partition, id, true, true)
}

func (i *Inspector) resolveHead(ctx context.Context, handler, partition, id string, dlq, check bool) (Resolution, error) {
	what := "skip"
	if dlq {
		what = "move to DLQ"
	}
	r, raw, err := i.findHalt(ctx, handler, partition)
	if err != nil {
		return Resolution{}, fmt.Errorf("%s %s: %w", what, id, err)
	}
	res := Resolution{Record: HaltRecord(r)}
	if r.EntryID != id {
		return res, fmt.Errorf("%s %s on %s: the halted head is %s: %w", what, id, r.Partition, r.EntryID, ErrNotHead)
	}
	var meta []any
	if dlq {
		res.DLQ = res.Record.DLQ()
		meta = []any{rdb.DLQFieldStream, r.Stream, rdb.DLQFieldEntryID, id, rdb.DLQFieldHandler, handler,
			rdb.DLQFieldPartition, r.Partition, rdb.DLQFieldReason, r.Reason, rdb.DLQFieldError, r.Error}
	}
	if check {
		err = rdb.CheckHead(ctx, i.c, handler, r, raw)
	} else {
		res.DLQEntryID, err = rdb.ResolveHead(ctx, i.c, handler, r, raw, res.DLQ, meta)
	}
	var refused *rdb.ResolveError
	switch {
	case err == nil:
		return res, nil
	case !errors.As(err, &refused):
		return res, fmt.Errorf("%s %s on %s: %w", what, id, r.Partition, err)
	case errors.Is(err, rdb.ErrResolveStale):
		removed := "stale halt record removed"
		if check {
			removed = "its halt record is stale"
		} else {
			rdb.ClearHalt(ctx, i.c, handler, r.RecordKey(), raw)
		}
		return res, fmt.Errorf("%s %s on %s: the entry is no longer pending, the partition moved past it (%s): %w", what, id, r.Partition, removed, ErrNotHalted)
	case errors.Is(err, rdb.ErrResolveNotHalted):
		return res, fmt.Errorf("%s %s on %s: the halt record changed since it was read (the partition moved on or halted again): %w", what, id, r.Partition, ErrNotHalted)
	case errors.Is(err, rdb.ErrResolveAttempting):
		return res, fmt.Errorf("%s %s on %s: %s is running an attempt of the head right now: %w", what, id, r.Partition, refused.Detail, ErrRetrying)
	case errors.Is(err, rdb.ErrResolveRetrying):
		return res, fmt.Errorf("%s %s on %s: lease held by %s, not by %s that halted: %w", what, id, r.Partition, refused.Detail, r.Token, ErrRetrying)
	case errors.Is(err, rdb.ErrResolveNotHead):
		first := refused.Detail
		if first == "" {
			first = "none"
		}
		return res, fmt.Errorf("%s %s on %s: first pending entry on %s is %s: %w", what, id, r.Partition, r.Stream, first, ErrNotHead)
	}
	return res, fmt.Errorf("%s %s on %s: %w", what, id, r.Partition, err)
}
