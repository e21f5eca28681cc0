package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// A halt is recorded in Redis (HaltsKey) so that operators, in any
// process, see it and can resolve it (operator.go). The record is a
// description of the head, not the halt itself: the halt is the head
// staying pending. So a record is only ever trusted together with the
// group's pending list: while its entry is pending the partition is
// stuck on it; once the entry is no longer pending (skipped, moved to the
// DLQ, or applied by a later owner) the record is stale and is removed by
// whoever notices first: the operator script, the next owner at claim or
// after it acks that entry, or ListHalts.

// HaltRecord is the JSON value of a halted partition's field in
// HaltsKey(handler).
type HaltRecord struct {
	Handler string `json:"handler"`
	// PM is true for a sequential process manager's correlation value.
	PM bool `json:"pm,omitempty"`
	// Partition is the field name: a keyed handler's partition stream
	// ({category}:{key}) or a pm's correlation value.
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

// DLQ is the dead-letter stream the head moves to: the primary stream of
// the head's category and key, plus ":dlq".
func (r HaltRecord) DLQ() string { return DLQStream(r.Category, r.Key) }

// haltField is p's field in HaltsKey: its partition stream, or for a pm
// its correlation value.
func (p *partition) haltField() string {
	if p.cats != nil {
		return p.key
	}
	return p.lanes[0]
}

// recordHalt writes h to Redis, fenced by p's lease so a stale owner
// cannot describe a head that is no longer its own. Redis errors are
// retried while the lease holds; false means the partition must end.
func (p *partition) recordHalt(h *Halt) bool {
	e := p.e
	r := HaltRecord{Handler: p.reg.Name, PM: p.cats != nil, Partition: p.haltField(), Category: h.Category,
		Key: p.key, Stream: h.Stream, Streams: p.lanes, EntryID: h.EntryID, MessageType: h.MessageType,
		MessageID: h.MessageID, Reason: h.Reason, Owner: e.o.OwnerID, Token: p.lease.Token(),
		LeaseKey: p.lease.Ref.Key, At: h.At.UTC()}
	if h.Err != nil {
		r.Error = h.Err.Error()
	}
	raw, err := json.Marshal(r)
	if err != nil {
		e.log.Error("seqby: encoding the halt record failed; the halt is only visible in this process", "stream", h.Stream, "err", err)
		return true
	}
	for {
		err := scriptRecordHalt.Run(p.ctx, e.c, []string{p.lease.Ref.Key, HaltsKey(p.reg.Name)},
			p.lease.Token(), r.Partition, string(raw)).Err()
		if err == nil {
			return true
		}
		if !p.retryable(fmt.Errorf("record halt of %s: %w", r.Partition, fenced(err, p.lease))) {
			return false
		}
	}
}

// priorHalt is a halt record a new owner found at claim whose head is
// still pending: the owner retries that head, and removes the record once
// it has acked it.
type priorHalt struct {
	stream, id, raw string
}

// checkHaltRecord runs after the claim: a record whose head is no longer
// pending is stale (an operator resolved it) and is removed; one whose
// head is pending is remembered, to be removed when the head is acked.
func (p *partition) checkHaltRecord() {
	e := p.e
	ctx, cancel := context.WithTimeout(p.ctx, e.o.LeaseTTL)
	defer cancel()
	r, raw, err := getHaltRecord(ctx, e.c, p.reg.Name, p.haltField())
	if err != nil {
		if !errors.Is(err, redis.Nil) {
			e.log.Warn("seqby: reading the halt record failed; a stale one is removed by the next owner or seqbyctl halted", "partition", p.haltField(), "err", err)
		}
		return
	}
	pending, err := isPending(ctx, e.c, r.Stream, p.reg.Name, r.EntryID)
	if err != nil {
		e.log.Warn("seqby: checking a halt record's head failed", "partition", p.haltField(), "err", err)
		return
	}
	if pending {
		p.prior = &priorHalt{stream: r.Stream, id: r.EntryID, raw: raw}
		return
	}
	clearHaltRecord(ctx, e.c, p.reg.Name, p.haltField(), raw, e.log.Warn)
}

// acked removes the prior halt record once its head was acked: the
// partition has moved past it.
func (p *partition) acked(en Entry) {
	if p.prior == nil || en.Stream != p.prior.stream || en.ID != p.prior.id {
		return
	}
	ctx, cancel := context.WithTimeout(p.ctx, p.e.o.LeaseTTL)
	defer cancel()
	clearHaltRecord(ctx, p.e.c, p.reg.Name, p.haltField(), p.prior.raw, p.e.log.Warn)
	p.prior = nil
}

// getHaltRecord reads and decodes one record; redis.Nil when none.
func getHaltRecord(ctx context.Context, c redis.UniversalClient, handler, partition string) (HaltRecord, string, error) {
	raw, err := c.HGet(ctx, HaltsKey(handler), partition).Result()
	if err != nil {
		return HaltRecord{}, "", err
	}
	var r HaltRecord
	if err := json.Unmarshal([]byte(raw), &r); err != nil {
		return HaltRecord{}, raw, fmt.Errorf("halt record %s of %s: %w", partition, handler, err)
	}
	return r, raw, nil
}

// isPending reports whether id is in group's pending list on stream. A
// missing stream or group counts as not pending.
func isPending(ctx context.Context, c redis.UniversalClient, stream, group, id string) (bool, error) {
	ps, err := c.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: stream, Group: group, Start: id, End: id, Count: 1}).Result()
	if isNoGroup(err) || errors.Is(err, redis.Nil) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return len(ps) == 1 && ps[0].ID == id, nil
}

// clearHaltRecord deletes the record only if it is still raw, so a newer
// halt of the same partition is never removed by mistake.
func clearHaltRecord(ctx context.Context, c redis.UniversalClient, handler, partition, raw string, warn func(string, ...any)) bool {
	n, err := scriptClearHalt.Run(ctx, c, []string{HaltsKey(handler)}, partition, raw).Int64()
	if err != nil {
		warn("seqby: removing a stale halt record failed; seqbyctl halted removes it later", "handler", handler, "partition", partition, "err", err)
		return false
	}
	return n == 1
}
