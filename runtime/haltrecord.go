package runtime

import (
	"context"
	"errors"

	"github.com/seqby/seqby/runtime/internal/rdb"
)

// A halt is recorded in Redis (rdb.HaltRecord) so that operators, in any
// process, see it and can resolve it (runtime/inspect). The record is a
// description of the head, not the halt itself: the halt is the head
// staying pending. So a record is only ever trusted together with the
// group's pending list: while its entry is pending the partition is
// stuck on it; once the entry is no longer pending (skipped, moved to the
// DLQ, or applied by a later owner) the record is stale and is removed by
// whoever notices first: the operator script, the next owner at claim or
// after it acks that entry, or the inspector's listing.

// haltField names p in its halt record: its partition stream, or for a
// pm its correlation value.
func (p *partition) haltField() string {
	if p.cats != nil {
		return p.key
	}
	return p.lanes[0]
}

// haltKey is the key of p's halt record.
func (p *partition) haltKey() string {
	if p.cats != nil {
		return rdb.PMHaltKey(p.reg.Name, p.key)
	}
	return rdb.HaltKey(p.lanes[0], p.reg.Name)
}

// recordHalt writes h to Redis, fenced by p's lease so a stale owner
// cannot describe a head that is no longer its own. Redis errors are
// retried while the lease holds; false means the partition must end.
func (p *partition) recordHalt(h *Halt) bool {
	e := p.e
	r := rdb.HaltRecord{Handler: p.reg.Name, PM: p.cats != nil, Partition: p.haltField(), Category: h.Category,
		Key: p.key, Stream: h.Stream, Streams: p.lanes, EntryID: h.EntryID, MessageType: h.MessageType,
		MessageID: h.MessageID, Reason: h.Reason, Owner: e.o.OwnerID, Token: p.held.Lease().Token(),
		LeaseKey: p.held.Lease().Ref.Key, At: h.At.UTC()}
	if h.Err != nil {
		r.Error = h.Err.Error()
	}
	for {
		raw, err := rdb.RecordHalt(p.held.Context(), e.c, p.held.Lease(), r)
		if err == nil {
			p.redisOK()
			// Cleared like a predecessor's record once the head is acked:
			// a retry of the halted head succeeded.
			p.prior = &priorHalt{stream: h.Stream, id: h.EntryID, raw: raw}
			return true
		}
		if errors.Is(err, rdb.ErrBadRecord) {
			e.log.Error("seqby: encoding the halt record failed; the halt is only visible in this process", "handler", p.reg.Name, "stream", h.Stream, "err", err)
			return true
		}
		if !p.retryable(err) {
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
// head is pending is remembered, to be removed when the head is acked. A
// Redis error is retried like any of the partition's calls (false: the
// partition must end): until the record is known, the owner could not
// tell that its first attempts of that head must be marked, and an
// operator's skip would not see them (the fence rule).
func (p *partition) checkHaltRecord() bool {
	e := p.e
	for {
		r, raw, found, pending, err := p.readHaltRecord()
		if err != nil {
			if errors.Is(err, rdb.ErrBadHaltRecord) {
				e.log.Warn("seqby: the halt record is not valid; delete it (seqbyctl halted names it)", "handler", p.reg.Name, "partition", p.haltField(), "err", err)
				return true
			}
			if !p.retryable(err) {
				return false
			}
			continue
		}
		p.redisOK()
		switch {
		case !found:
		case pending:
			p.prior = &priorHalt{stream: r.Stream, id: r.EntryID, raw: raw}
			ctx, cancel := context.WithTimeout(p.held.Context(), e.o.LeaseTTL)
			if err := rdb.Index(ctx, e.c, p.reg.Name, p.haltKey()); err != nil {
				e.log.Warn("seqby: indexing a halt record failed; seqbyctl may not list it until the partition halts again", "handler", p.reg.Name, "partition", p.haltField(), "err", err)
			}
			cancel()
		default:
			ctx, cancel := context.WithTimeout(p.held.Context(), e.o.LeaseTTL)
			p.clearHalt(ctx, raw)
			cancel()
		}
		return true
	}
}

// readHaltRecord reads p's halt record and whether its head is pending.
func (p *partition) readHaltRecord() (r rdb.HaltRecord, raw string, found, pending bool, err error) {
	ctx, cancel := context.WithTimeout(p.held.Context(), p.e.o.LeaseTTL)
	defer cancel()
	r, raw, found, err = rdb.GetHalt(ctx, p.e.c, p.haltKey())
	if err != nil || !found {
		return r, raw, found, false, err
	}
	pending, err = rdb.IsPending(ctx, p.e.c, r.Stream, p.reg.Name, r.EntryID)
	return r, raw, found, pending, err
}

// acked removes the prior halt record once its head was acked: the
// partition has moved past it.
func (p *partition) acked(en rdb.Entry) {
	if p.prior == nil || en.Stream != p.prior.stream || en.ID != p.prior.id {
		return
	}
	ctx, cancel := context.WithTimeout(p.held.Context(), p.e.o.LeaseTTL)
	defer cancel()
	p.clearHalt(ctx, p.prior.raw)
	p.prior = nil
}

// clearHalt removes p's halt record if it is still raw.
func (p *partition) clearHalt(ctx context.Context, raw string) {
	if _, err := rdb.ClearHalt(ctx, p.e.c, p.reg.Name, p.haltKey(), raw); err != nil {
		p.e.log.Warn("seqby: removing a stale halt record failed; seqbyctl halted removes it later", "handler", p.reg.Name, "partition", p.haltField(), "err", err)
	}
}

// hasHaltRecord reports whether en is a head with a halt record: the
// head p halted on, or the one a predecessor's record names.
func (p *partition) hasHaltRecord(en rdb.Entry) bool {
	if p.head != nil && p.head.Stream == en.Stream && p.head.ID == en.ID {
		return true
	}
	return p.prior != nil && p.prior.stream == en.Stream && p.prior.id == en.ID
}
