package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Operator actions on halted partitions (ADR-0028 decision 6): a halted
// partition stays stuck on its head until an operator inspects it and
// skips the head or moves it to the DLQ. These functions need only a
// Redis client, not an engine; cmd/seqbyctl is their command line.
//
// A partition is named by its halt record's field (a keyed handler's
// partition stream, or a pm's correlation value) or by the stream holding
// its head.

// ErrNotHalted means there is no halt record for the partition: it is not
// halted, or it has already moved past its head.
var ErrNotHalted = errors.New("partition is not halted (no halt record; it may have moved on); list the halted partitions with seqbyctl halted")

// ErrNotHead means the entry is not the halted partition's head (the
// group's first pending entry on the head's stream), so nothing was done:
// the operator never skips another message than the one inspected.
var ErrNotHead = errors.New("entry is not the halted partition's head; inspect the partition again and use the head's id")

// ErrRetrying means the lease is held by another owner than the one that
// halted: that owner is retrying the head right now, and skipping under it
// could run the head and its successor at once. Wait until it halts again
// (seqbyctl halted shows the new record) and retry.
var ErrRetrying = errors.New("an owner is retrying the head; wait until it halts again and retry")

// PendingEntry is one entry of a consumer group's pending list.
type PendingEntry struct {
	ID         string        `json:"id"`
	Consumer   string        `json:"consumer"` // the lease token of the owner holding it
	Idle       time.Duration `json:"idle_ns"`
	Deliveries int64         `json:"deliveries"`
}

// LaneInfo is one stream of a partition as the group sees it.
type LaneInfo struct {
	Stream  string         `json:"stream"`
	Exists  bool           `json:"exists"`
	Length  int64          `json:"length"`
	Pending []PendingEntry `json:"pending"` // the group's pending entries, oldest first (at most 100)
}

// Inspection is what an operator looks at before resolving a head.
type Inspection struct {
	Handler   string `json:"handler"`
	Partition string `json:"partition"`
	// Halt is the halt record; nil when the partition is not halted (a
	// keyed handler's partition stream can be inspected anyway).
	Halt     *HaltRecord   `json:"halt"`
	LeaseKey string        `json:"lease_key"`
	Lease    string        `json:"lease"`        // current lease token, "" when free
	LeaseTTL time.Duration `json:"lease_ttl_ns"` // remaining, 0 when free
	Lanes    []LaneInfo    `json:"streams"`
	Head     *Entry        `json:"head"` // the halted head, else the first pending entry; nil when none
	// Stale reports a halt record whose head was no longer pending: the
	// partition had moved past it, so Halt is nil and the record was
	// removed.
	Stale bool `json:"stale,omitempty"`
}

// Resolution reports a resolved head.
type Resolution struct {
	Record     HaltRecord // the halt record that was resolved (and removed)
	DLQ        string     // the dead-letter stream, "" for Skip
	DLQEntryID string     // id of the copy in DLQ
}

// ListHalts returns the halted partitions of handler (all handlers when
// handler is ""), sorted by handler and partition. A record whose head is
// no longer pending is stale (the partition moved on) and is removed, not
// returned, so a listed partition is really stuck on the listed entry.
func ListHalts(ctx context.Context, c redis.UniversalClient, handler string) ([]HaltRecord, error) {
	handlers := []string{handler}
	if handler == "" {
		var err error
		if handlers, err = haltedHandlers(ctx, c); err != nil {
			return nil, err
		}
	}
	var out []HaltRecord
	for _, h := range handlers {
		all, err := c.HGetAll(ctx, HaltsKey(h)).Result()
		if err != nil {
			return nil, fmt.Errorf("list halts of %s: %w", h, err)
		}
		for field, raw := range all {
			var r HaltRecord
			if err := json.Unmarshal([]byte(raw), &r); err != nil {
				return nil, fmt.Errorf("halt record %s of %s is not valid JSON (delete the field with HDEL %s %s): %w", field, h, HaltsKey(h), field, err)
			}
			pending, err := isPending(ctx, c, r.Stream, h, r.EntryID)
			if err != nil {
				return nil, fmt.Errorf("check halt record %s of %s: %w", field, h, err)
			}
			if !pending {
				clearHaltRecord(ctx, c, h, field, raw, func(string, ...any) {})
				continue
			}
			out = append(out, r)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Handler != out[j].Handler {
			return out[i].Handler < out[j].Handler
		}
		return out[i].Partition < out[j].Partition
	})
	return out, nil
}

// haltedHandlers finds the handlers with a halts hash. It scans the
// keyspace (on every primary of a cluster): an operator command, never on
// the consumer's path.
func haltedHandlers(ctx context.Context, c redis.UniversalClient) ([]string, error) {
	seen := map[string]bool{}
	scan := func(ctx context.Context, c redis.Cmdable) error {
		it := c.Scan(ctx, 0, HaltsKey("*"), 1000).Iterator()
		for it.Next(ctx) {
			seen[strings.TrimPrefix(it.Val(), HaltsKey(""))] = true
		}
		return it.Err()
	}
	var err error
	if cc, ok := c.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error { return scan(ctx, m) })
	} else {
		err = scan(ctx, c)
	}
	if err != nil {
		return nil, fmt.Errorf("find handlers with halts: %w", err)
	}
	out := make([]string, 0, len(seen))
	for h := range seen {
		out = append(out, h)
	}
	sort.Strings(out)
	return out, nil
}

// findHalt resolves partition (a record's field, or the stream holding
// its head) to its halt record and the record's raw value.
func findHalt(ctx context.Context, c redis.UniversalClient, handler, partition string) (HaltRecord, string, error) {
	r, raw, err := getHaltRecord(ctx, c, handler, partition)
	if err == nil {
		return r, raw, nil
	}
	if !errors.Is(err, redis.Nil) {
		return HaltRecord{}, "", err
	}
	all, err := c.HGetAll(ctx, HaltsKey(handler)).Result()
	if err != nil {
		return HaltRecord{}, "", fmt.Errorf("read halts of %s: %w", handler, err)
	}
	for _, raw := range all {
		var r HaltRecord
		if json.Unmarshal([]byte(raw), &r) == nil && r.Stream == partition {
			return r, raw, nil
		}
	}
	return HaltRecord{}, "", fmt.Errorf("%s of handler %s: %w", partition, handler, ErrNotHalted)
}

// Inspect describes a partition of handler: its halt record (if halted),
// lease, streams with the group's pending entries, and the head entry with
// its fields. Without a halt record, partition is taken as a keyed
// handler's partition stream (a pm's value can be inspected only while it
// is halted: its streams are listed in the record).
func Inspect(ctx context.Context, c redis.UniversalClient, handler, partition string) (Inspection, error) {
	in := Inspection{Handler: handler, Partition: partition}
	r, raw, err := findHalt(ctx, c, handler, partition)
	switch {
	case err == nil:
		pending, err := isPending(ctx, c, r.Stream, handler, r.EntryID)
		if err != nil {
			return in, fmt.Errorf("inspect %s: %w", partition, err)
		}
		if pending {
			in.Halt = &r
		} else {
			clearHaltRecord(ctx, c, handler, r.Partition, raw, func(string, ...any) {})
			in.Stale = true
		}
		in.Partition, in.LeaseKey = r.Partition, r.LeaseKey
		in.Lanes = lanesOf(r.Streams)
	case errors.Is(err, ErrNotHalted):
		in.LeaseKey = LeaseKey(partition, handler)
		in.Lanes = lanesOf([]string{partition, partition + ":" + DefaultBackfillSuffix})
	default:
		return in, fmt.Errorf("inspect %s: %w", partition, err)
	}
	if in.Lease, err = c.Get(ctx, in.LeaseKey).Result(); err != nil && !errors.Is(err, redis.Nil) {
		return in, fmt.Errorf("inspect %s: lease: %w", partition, err)
	}
	if in.Lease != "" {
		in.LeaseTTL, _ = c.PTTL(ctx, in.LeaseKey).Result()
	}
	for i := range in.Lanes {
		if err := inspectLane(ctx, c, handler, &in.Lanes[i]); err != nil {
			return in, fmt.Errorf("inspect %s: %w", in.Lanes[i].Stream, err)
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
		msgs, err := c.XRangeN(ctx, stream, id, id, 1).Result()
		if err != nil {
			return in, fmt.Errorf("inspect %s: read head %s: %w", stream, id, err)
		}
		in.Head = &Entry{Stream: stream, ID: id}
		if len(msgs) == 1 { // nil Fields: deleted from the stream while pending
			in.Head.Fields = map[string]string{}
			for k, v := range msgs[0].Values {
				in.Head.Fields[k] = fmt.Sprint(v)
			}
		}
	}
	return in, nil
}

func lanesOf(streams []string) []LaneInfo {
	out := make([]LaneInfo, len(streams))
	for i, s := range streams {
		out[i].Stream = s
	}
	return out
}

func inspectLane(ctx context.Context, c redis.UniversalClient, group string, l *LaneInfo) error {
	n, err := c.Exists(ctx, l.Stream).Result()
	if err != nil || n == 0 {
		return err
	}
	l.Exists = true
	if l.Length, err = c.XLen(ctx, l.Stream).Result(); err != nil {
		return err
	}
	ps, err := c.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: l.Stream, Group: group, Start: "-", End: "+", Count: 100}).Result()
	if isNoGroup(err) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, p := range ps {
		l.Pending = append(l.Pending, PendingEntry{ID: p.ID, Consumer: p.Consumer, Idle: p.Idle, Deliveries: p.RetryCount})
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
func Skip(ctx context.Context, c redis.UniversalClient, handler, partition, id string) (Resolution, error) {
	return resolveHead(ctx, c, handler, partition, id, false)
}

// MoveToDLQ is Skip that first appends a copy of the head to the
// partition's dead-letter stream (HaltRecord.DLQ, "{category}:{key}:dlq"
// of the head's category): the entry's fields, then dlq_stream,
// dlq_entry_id, dlq_handler, dlq_partition, dlq_reason and dlq_error. The
// copy, the ack and the lease deletion are one atomic step.
func MoveToDLQ(ctx context.Context, c redis.UniversalClient, handler, partition, id string) (Resolution, error) {
	return resolveHead(ctx, c, handler, partition, id, true)
}

func resolveHead(ctx context.Context, c redis.UniversalClient, handler, partition, id string, dlq bool) (Resolution, error) {
	what := "skip"
	if dlq {
		what = "move to DLQ"
	}
	r, raw, err := findHalt(ctx, c, handler, partition)
	if err != nil {
		return Resolution{}, fmt.Errorf("%s %s: %w", what, id, err)
	}
	res := Resolution{Record: r}
	if r.EntryID != id {
		return res, fmt.Errorf("%s %s on %s: the halted head is %s: %w", what, id, r.Partition, r.EntryID, ErrNotHead)
	}
	keys := []string{HaltsKey(handler), r.Stream, r.LeaseKey}
	args := []any{r.Partition, raw, r.Token, handler, id}
	if dlq {
		res.DLQ = r.DLQ()
		keys = append(keys, res.DLQ)
		args = append(args, "dlq_stream", r.Stream, "dlq_entry_id", id, "dlq_handler", handler,
			"dlq_partition", r.Partition, "dlq_reason", r.Reason, "dlq_error", r.Error)
	}
	reply, err := scriptResolveHead.Run(ctx, c, keys, args...).StringSlice()
	if err != nil {
		return res, fmt.Errorf("%s %s on %s: %w", what, id, r.Partition, err)
	}
	if len(reply) != 2 {
		return res, fmt.Errorf("%s %s on %s: unexpected reply %v", what, id, r.Partition, reply)
	}
	switch reply[0] {
	case "OK":
		res.DLQEntryID = reply[1]
		return res, nil
	case "STALE":
		clearHaltRecord(ctx, c, handler, r.Partition, raw, func(string, ...any) {})
		return res, fmt.Errorf("%s %s on %s: the entry is no longer pending, the partition moved past it (stale halt record removed): %w", what, id, r.Partition, ErrNotHalted)
	case "NOT_HALTED":
		return res, fmt.Errorf("%s %s on %s: the halt record changed since it was read (the partition moved on or halted again): %w", what, id, r.Partition, ErrNotHalted)
	case "RETRYING":
		return res, fmt.Errorf("%s %s on %s: lease held by %s, not by %s that halted: %w", what, id, r.Partition, reply[1], r.Token, ErrRetrying)
	case "NOT_HEAD":
		first := reply[1]
		if first == "" {
			first = "none"
		}
		return res, fmt.Errorf("%s %s on %s: first pending entry on %s is %s: %w", what, id, r.Partition, r.Stream, first, ErrNotHead)
	}
	return res, fmt.Errorf("%s %s on %s: unexpected reply %v", what, id, r.Partition, reply)
}
