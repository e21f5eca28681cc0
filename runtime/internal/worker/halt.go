package worker

import (
	"context"
	"errors"

	"github.com/seqby/seqby/runtime/internal/contract"
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

// haltField names w in its halt record: its partition stream, or for a
// pm its correlation value.
func (w *Worker) haltField() string {
	if w.unit.PM {
		return w.unit.Key
	}
	return w.unit.Lanes[0]
}

// haltKey is the control hash holding w's halt record.
func (w *Worker) haltKey() string {
	if w.unit.PM {
		return rdb.MetaKey(rdb.PMLeaseKey(w.unit.Handler, w.unit.Key))
	}
	return rdb.MetaKey(rdb.LeaseKey(w.unit.Lanes[0], w.unit.Handler))
}

// recordHalt writes h to Redis, fenced by w's lease so a stale owner
// cannot describe a head that is no longer its own. Redis errors are
// retried while the lease holds; false means the partition must end.
func (w *Worker) recordHalt(h *contract.Halt) bool {
	cfg := w.cfg()
	r := rdb.HaltRecord{Handler: w.unit.Handler, PM: w.unit.PM, Partition: w.haltField(), Category: h.Category,
		Key: w.unit.Key, Stream: h.Stream, Streams: w.unit.Lanes, EntryID: h.EntryID, MessageType: h.MessageType,
		MessageID: h.MessageID, Reason: h.Reason, Owner: cfg.Owner, Token: w.held.Lease().Token(),
		LeaseKey: w.held.Lease().Ref.Key, At: h.At.UTC()}
	if h.Err != nil {
		r.Error = h.Err.Error()
	}
	for {
		raw, err := rdb.RecordHalt(w.held.Context(), cfg.Client, w.held.Lease(), r)
		if err == nil {
			w.redisOK()
			// Cleared like a predecessor's record once the head is acked:
			// a retry of the halted head succeeded.
			w.prior = &priorHalt{stream: h.Stream, id: h.EntryID, raw: raw}
			return true
		}
		if errors.Is(err, rdb.ErrBadRecord) {
			cfg.Log.Error("seqby: encoding the halt record failed; the halt is only visible in this process", "handler", w.unit.Handler, "stream", h.Stream, "err", err)
			return true
		}
		if !w.retryable(err) {
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
func (w *Worker) checkHaltRecord() bool {
	cfg := w.cfg()
	for {
		r, raw, found, pending, err := w.readHaltRecord()
		if err != nil {
			if errors.Is(err, rdb.ErrBadHaltRecord) {
				cfg.Log.Warn("seqby: the halt record is not valid; delete it (seqbyctl halted names it)", "handler", w.unit.Handler, "partition", w.haltField(), "err", err)
				return true
			}
			if !w.retryable(err) {
				return false
			}
			continue
		}
		w.redisOK()
		switch {
		case !found:
		case pending:
			w.prior = &priorHalt{stream: r.Stream, id: r.EntryID, raw: raw}
			ctx, cancel := context.WithTimeout(w.held.Context(), cfg.LeaseTTL)
			if err := rdb.Index(ctx, cfg.Client, w.unit.Handler, w.haltKey()); err != nil {
				cfg.Log.Warn("seqby: indexing a halt record failed; seqbyctl may not list it until the partition halts again", "handler", w.unit.Handler, "partition", w.haltField(), "err", err)
			}
			cancel()
		default:
			ctx, cancel := context.WithTimeout(w.held.Context(), cfg.LeaseTTL)
			w.clearHalt(ctx, raw)
			cancel()
		}
		return true
	}
}

// readHaltRecord reads w's halt record and whether its head is pending.
func (w *Worker) readHaltRecord() (r rdb.HaltRecord, raw string, found, pending bool, err error) {
	ctx, cancel := context.WithTimeout(w.held.Context(), w.cfg().LeaseTTL)
	defer cancel()
	r, raw, found, err = rdb.GetHalt(ctx, w.cfg().Client, w.haltKey())
	if err != nil || !found {
		return r, raw, found, false, err
	}
	pending, err = rdb.IsPending(ctx, w.cfg().Client, r.Stream, w.unit.Handler, r.EntryID)
	return r, raw, found, pending, err
}

// clearHalt removes w's halt record if it is still raw.
func (w *Worker) clearHalt(ctx context.Context, raw string) {
	if _, err := rdb.ClearHalt(ctx, w.cfg().Client, w.unit.Handler, w.haltKey(), raw); err != nil {
		w.cfg().Log.Warn("seqby: removing a stale halt record failed; seqbyctl halted removes it later", "handler", w.unit.Handler, "partition", w.haltField(), "err", err)
	}
}

// An operator resolves a halted head (seqbyctl skip or dlq move) by acking
// it and deleting the halted owner's lease in one script, which leaves a
// note next to the lease (rdb.MetaResolved). For the halted owner that is
// the expected end of its partition, not an incident: it logs it at info
// level with the operator's audit entry and counts it in
// seqby.partitions.resolved, while seqby.lease.lost counts real losses
// only.

// auditScan is how many of the newest audit entries are searched for the
// one of a resolve.
const auditScan = 100

// reportLossOrResolution reports a halted partition's deferred loss
// (lease.Held.TakeLossCause) as finish ends it: a resolution when the
// operator's note names this lease's token and its halted head, else a
// loss.
func (w *Worker) reportLossOrResolution() {
	cause := w.held.TakeLossCause()
	if cause == nil {
		return
	}
	cfg := w.cfg()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(w.held.Context()), cfg.HeartbeatInterval)
	defer cancel()
	res, found, err := rdb.Resolved(ctx, cfg.Client, w.held.Lease().Ref.Key)
	if err != nil || !found || res.Token != w.held.Lease().Token() || w.head == nil || res.EntryID != w.head.ID {
		w.held.ReportLoss(cause)
		return
	}
	cfg.Telemetry.PartitionResolved(w.unit.Handler)
	who, command := "", res.Command
	if es, err := rdb.AuditLog(ctx, cfg.Client, auditScan); err == nil {
		for _, a := range es {
			if a.Fields["entry_id"] == res.EntryID && a.Fields["handler"] == w.unit.Handler {
				who, command = a.Fields["who"], a.Fields["command"]
				break
			}
		}
	}
	cfg.Log.Info("seqby: halt resolved by operator; this instance leaves the partition and its next owner continues after the head",
		"handler", w.unit.Handler, "stream", w.unit.Lanes[0], "entry", res.EntryID, "command", command, "who", who, "token", w.held.Lease().Token())
}
