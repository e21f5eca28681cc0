package worker

import (
	"context"
	"errors"
	"time"

	"github.com/seqby/seqby/runtime/internal/contract"
	"github.com/seqby/seqby/runtime/internal/executor"
	"github.com/seqby/seqby/runtime/internal/lease"
	"github.com/seqby/seqby/runtime/internal/rdb"
)

// reader is how a worker reads its entries and hands each to the
// executor: a keyed partition's (keyed) or a pm's correlation value's
// (pmReader). The worker loop is the same for both.
type reader interface {
	// next returns the worker's next entry (ok false: drained): its
	// halted head first, from memory. confirmed is when the fenced call
	// that confirmed the lease for the entry was sent (zero: none was,
	// the entry came from memory), for the fence rule. marks are the
	// wake-up marks taken before it, one per category.
	next(w *Worker, marks []uint64) (en rdb.Entry, ok bool, confirmed time.Time, err error)
	// idleMarks are the marks a drained worker sleeps on: a signal
	// counted after them wakes it.
	idleMarks(w *Worker, marks []uint64) []uint64
	// handle runs en (of category) through the executor behind g.
	handle(w *Worker, g *lease.Gate, category string, en rdb.Entry) (executor.Outcome, *contract.Halt)
}

// reads is what a worker read and has not settled, and its prefetch in
// flight. Only the worker's own goroutine touches them.
type reads struct {
	// unacked are the entries processed and not acked yet, in order, all
	// on one lane (a read's, and its prefetch's, which follows a full
	// read of the first lane that carried every earlier ack): their
	// fenced ack is sent with the next read, or alone before the next
	// entry runs. Under the default promise there is at most one, acked
	// before anything else of the partition runs; with
	// Registration.AckBatch N, up to N-1 wait while the next entry runs
	// (batched: see keyed.next).
	unacked []rdb.Entry
	// ahead are entries read ahead (Options.ReadAhead), in order, not run
	// yet: each runs only after the entry before it is acked.
	ahead []rdb.Entry
	// drained: the last read saw nothing after what it returned, so once
	// those have run the last ack goes alone and the worker waits for a
	// signal counted after readMark, the wake-up mark taken before that
	// read.
	drained  bool
	readMark uint64
	// deep: the last read was full and saw more after it, a backlog
	// deeper than one read: its calls go first in the Batcher's rounds,
	// so a hot key's round trip does not wait behind every cold
	// partition's.
	deep bool
	// prefetch is a batched partition's read of new entries sent before
	// the entries it holds ran out (nil: none in flight), carrying the
	// acks of the first prefetchAcks entries of unacked; prefetchSent and
	// prefetchMark are its send time and the wake-up mark taken before
	// it. No other call of the partition goes while it is in flight, so
	// its acks land in order.
	prefetch     *rdb.Prefetch
	prefetchAcks int
	prefetchSent time.Time
	prefetchMark uint64
	// settledGen is the lease generation under which the last read came
	// back whole and found nothing pending (its entries were new), so
	// nothing is pending under the worker's consumer but what it holds:
	// its next read may skip the pending pass (rdb.ReadFlags.Settled).
	// 0: not known (a new generation's first read, or after a read that
	// failed, whose reply may be what was lost, or found a pause).
	settledGen int64
}

// keyed reads a keyed handler's partition: its lanes in order, up to
// readCount entries a read, each run once the one before it is acked
// (or, batched, while fewer than Registration.AckBatch acks wait).
type keyed struct{}

// idleMarks: a drained keyed worker waits for a signal counted after its
// last read.
func (keyed) idleMarks(w *Worker, _ []uint64) []uint64 { return []uint64{w.r.readMark} }

// handle runs en through the executor's Handle.
func (keyed) handle(w *Worker, g *lease.Gate, category string, en rdb.Entry) (executor.Outcome, *contract.Halt) {
	return w.cfg().Exec.Handle(w.held.Context(), w.hand.release, g, w.unit.Handler, category, en, w.Halted())
}

// next returns the partition's next entry (ok false: drained): its
// halted head, from memory; else the first entry read ahead, once the
// entries before it are acked (fenced), or else the first of a fenced
// read that carries those acks (seq, marks[0]: the wake-up mark taken
// before it). When the last read saw nothing more, the
// last acks go alone, a cheaper call, and the worker waits for a signal
// counted after that read (an entry published since has one). confirmed
// is when the fenced call that confirmed the lease for the entry was sent
// (zero: none was, the entry came from memory), for the fence rule
// (package lease).
//
// Batched (Registration.AckBatch N > 1): an entry read ahead runs without
// waiting for the acks of those before it while fewer than N are
// unanswered and the last confirmation is within Options.VerifyBound; it
// counts from that confirmation. Else the unanswered acks go first, in
// one fenced call, which confirms the lease anew. So at most N entries,
// the one in flight included, can run again after a crash or a stall, in
// order.
func (keyed) next(w *Worker, marks []uint64) (en rdb.Entry, ok bool, confirmed time.Time, err error) {
	if en, ok := w.heldHead(); ok {
		return en, true, time.Time{}, nil
	}
	cfg := w.cfg()
	seq := marks[0]
	batch := max(w.unit.AckBatch, 1)
	if w.r.prefetch != nil && (len(w.r.ahead) == 0 || len(w.r.unacked) >= batch || w.r.prefetch.Ready() ||
		time.Since(w.held.ConfirmedAt) > cfg.VerifyBound) {
		if err := w.collect(w.held.Context()); err != nil {
			return rdb.Entry{}, false, time.Time{}, err
		}
	}
	if len(w.r.ahead) == 0 && w.r.drained && len(w.r.unacked) > 0 {
		sent := time.Now()
		if err := w.ackUnacked(); err != nil {
			return rdb.Entry{}, false, time.Time{}, err
		}
		w.held.ConfirmedAt = sent
		return rdb.Entry{}, false, time.Time{}, nil
	}
	if len(w.r.ahead) == 0 {
		sent := time.Now()
		lease := w.held.Lease()
		es, more, err := cfg.Batch.ReadAhead(w.held.Context(), lease, w.group(), w.unit.Lanes, w.readCount(), w.r.unacked,
			rdb.ReadFlags{Urgent: w.r.deep, Settled: w.r.settledGen == lease.Generation})
		w.r.settledGen = 0
		if err == nil && (len(es) == 0 || !es[0].Pending) {
			w.r.settledGen = lease.Generation
		}
		if pausedBy(err) {
			w.ackedPrevious() // the acks it carried were done
		}
		if err != nil {
			return rdb.Entry{}, false, time.Time{}, err
		}
		w.unpaused()
		w.held.ConfirmedAt = sent
		w.ackedPrevious()
		w.r.readMark, w.r.drained = seq, !more
		w.r.deep = more && len(es) >= w.readCount()
		if len(es) == 0 {
			return rdb.Entry{}, false, time.Time{}, nil
		}
		w.r.ahead = es[1:]
		return es[0], true, sent, nil
	}
	confirmed = w.held.ConfirmedAt
	// (A prefetch in flight was collected above in both cases, so the
	// acks below are the only call in flight, sent now.)
	if len(w.r.unacked) > 0 && (len(w.r.unacked) >= batch || time.Since(w.held.ConfirmedAt) > cfg.VerifyBound) {
		confirmed = time.Now()
		if err := w.ackUnacked(); err != nil {
			return rdb.Entry{}, false, time.Time{}, err
		}
		w.held.ConfirmedAt = confirmed
	}
	w.prefetchIf(seq)
	en = w.r.ahead[0]
	w.r.ahead = w.r.ahead[1:]
	return en, true, confirmed, nil
}

// ackUnacked acks w.r.unacked in one fenced call of the Batcher's next
// round (after the prefetch in flight, if any, is answered), then does
// what follows (ackedPrevious).
func (w *Worker) ackUnacked() error {
	// A prefetch that found the partition paused did its acks: the rest
	// still go.
	paused := w.collect(w.held.Context())
	if paused != nil && !pausedBy(paused) {
		return paused
	}
	if len(w.r.unacked) == 0 {
		return paused
	}
	err := w.cfg().Batch.AckEntries(w.held.Context(), w.held.Lease(), w.group(), w.r.unacked, w.r.deep)
	if err != nil && !pausedBy(err) {
		return err
	}
	// Paused: the acks were done, and the lease is not confirmed for the
	// next entry (the caller sleeps).
	w.ackedPrevious()
	if err == nil {
		// The ack found no pause mark: a pause the prefetch found was
		// resumed since (its wake-up may already have been read).
		w.unpaused()
	}
	return err
}

// prefetchIf sends, for a batched partition whose backlog is deeper than
// one read, the read of its next entries once half of those it holds
// have run, so they are in by the time the rest have (the batched mode
// pays one round trip per batch; this hides it). It carries the acks of
// the entries run so far.
func (w *Worker) prefetchIf(seq uint64) {
	n := w.readCount()
	if w.unit.AckBatch <= 1 || w.r.prefetch != nil || !w.r.deep || len(w.r.ahead) > n/2 {
		return
	}
	w.r.prefetchSent, w.r.prefetchMark, w.r.prefetchAcks = time.Now(), seq, len(w.r.unacked)
	// Every entry the owner holds pending bounds what a resent prefetch
	// hands back (RoundSlice.After): those read ahead, and a halted or
	// interrupted head kept in memory.
	held := w.r.ahead
	for _, e := range []*rdb.Entry{w.head, w.stopped} {
		if e != nil {
			held = append(held[:len(held):len(held)], *e)
		}
	}
	lease := w.held.Lease()
	w.r.prefetch = w.cfg().Batch.ReadNew(lease, w.group(), w.unit.Lanes, n, w.r.unacked, held, w.r.settledGen == lease.Generation)
}

// collect takes the reply of the prefetch in flight (none: nothing to
// do): the acks it carried are done, and its entries follow those held.
//
// On an error the entries it may have delivered (its reply may be what
// was lost) stay pending under this owner, newer than those held: deep is
// cleared, so no prefetch goes until a read (with its pending pass, once
// the held entries have run) hands them over, in order. A prefetch that
// found nothing new on the first lane says nothing of the later lanes, so
// the partition is not taken for drained either: the read that follows
// once the held entries have run decides, with a fresh wake-up mark.
func (w *Worker) collect(ctx context.Context) error {
	if w.r.prefetch == nil {
		return nil
	}
	es, more, err := w.r.prefetch.Wait(ctx)
	k, sent, mark := w.r.prefetchAcks, w.r.prefetchSent, w.r.prefetchMark
	w.r.prefetch, w.r.prefetchAcks = nil, 0
	if err != nil {
		// Its reply may be what was lost: what it delivered is pending
		// unseen until a read's pending pass hands it over.
		w.r.settledGen = 0
	}
	if pausedBy(err) {
		w.ackedFirst(k) // the acks it carried were done
		w.r.deep = false
		return prefetchPaused{mark: mark, err: err}
	}
	if err != nil {
		w.r.deep = false
		return err
	}
	w.ackedFirst(k)
	w.held.ConfirmedAt = sent
	if len(es) == 0 {
		w.r.deep, w.r.drained = false, false
		return nil
	}
	w.r.ahead = append(w.r.ahead, es...)
	w.r.deep = more && len(es) >= w.readCount()
	if w.r.drained = !more; w.r.drained {
		w.r.readMark = mark
	}
	return nil
}

// prefetchPaused is the pause a prefetch found. It was sent under an
// older wake-up mark than the worker's latest, which the worker sleeps on
// (pausedMark): a Resume whose wake-up came between the prefetch's run
// and the worker's mark still wakes it.
type prefetchPaused struct {
	mark uint64 // the wake-up mark the prefetch was sent under
	err  error  // rdb.ErrPaused's
}

func (e prefetchPaused) Error() string { return e.err.Error() }
func (e prefetchPaused) Unwrap() error { return e.err }

// pausedMark is the wake-up mark a worker that found its partition paused
// (err) sleeps on: seq, the mark taken before its own calls, or the older
// one of the prefetch that found the pause.
func pausedMark(err error, seq uint64) uint64 {
	var pp prefetchPaused
	if errors.As(err, &pp) {
		return min(seq, pp.mark)
	}
	return seq
}

// readCount is how many new entries one read of w takes at most:
// Options.ReadAhead, or the handler's AckBatch when larger, so a batched
// partition has a batch to run.
func (w *Worker) readCount() int { return max(w.cfg().ReadAhead, w.unit.AckBatch) }

// ackedPrevious does what follows the ack of w.r.unacked, once a call that
// carried it succeeded.
func (w *Worker) ackedPrevious() { w.ackedFirst(len(w.r.unacked)) }

// ackedFirst does what follows the ack of the first n entries of
// w.r.unacked, once a call that carried them succeeded.
func (w *Worker) ackedFirst(n int) {
	if n == 0 {
		return
	}
	for _, en := range w.r.unacked[:n] {
		w.acked(en)
		w.trims.Acked()
		w.cfg().Members.Worked(w.unit.Handler)
	}
	rest := copy(w.r.unacked, w.r.unacked[n:])
	clear(w.r.unacked[rest:])
	w.r.unacked = w.r.unacked[:rest]
	// The marked head, if one ran, is acked: a retried head is the first
	// entry a partition runs after its halt.
	w.held.EndAttempt()
}
