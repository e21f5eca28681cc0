package worker

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/seqby/seqby/runtime/internal/contract"
	"github.com/seqby/seqby/runtime/internal/executor"
	"github.com/seqby/seqby/runtime/internal/lease"
	"github.com/seqby/seqby/runtime/internal/rdb"
	"github.com/seqby/seqby/runtime/internal/replicas"
)

// work is the worker loop, over its reader; true: it sleeps (sleep armed
// what resumes it), false: the partition must end. marks are the wake-up
// marks taken before each turn's calls, one per category.
func (w *Worker) work() (asleep bool) {
	cfg := w.cfg()
	marks := make([]uint64, len(w.unit.Cats))
	for !w.parked() {
		for i, c := range w.unit.Cats {
			marks[i] = cfg.Wake.Mark(c, w.unit.Key)
		}
		if hp := cfg.Paused(w.unit.Handler); hp != nil {
			return w.sleepPaused(marks, hp)
		}
		w.handlerResumed()
		// confirmed: when the fenced call that returned en was sent (the
		// fence rule; zero: the entry comes from memory).
		en, ok, confirmed, err := w.reader.next(w, marks)
		if pausedBy(err) {
			marks[0] = pausedMark(err, marks[0])
			return w.sleepPaused(marks, nil)
		}
		if err != nil {
			if !w.retryable(err) {
				return false
			}
			continue
		}
		w.redisOK()
		w.observeWork(en, ok, !w.r.drained)
		if !ok {
			w.trimIf(true)
			if w.releaseCold() {
				return false
			}
			w.sleep(w.idleWait(), w.unit.Cats, w.reader.idleMarks(w, marks))
			return true
		}
		w.held.NameIf(en)
		category := w.unit.LaneCats[max(slices.Index(w.unit.Lanes, en.Stream), 0)]
		out, h := executor.OutHalt, cfg.Exec.OverDelivered(w.unit.Handler, category, en)
		var g *lease.Gate
		if h == nil {
			g = w.held.Gate(confirmed, w.hasHaltRecord(en))
			out, h = w.reader.handle(w, g, category, en)
		}
		if out == executor.OutPause {
			// No attempt started: the entry runs first once resumed (a
			// halted head stays held as the head).
			if w.head == nil {
				w.r.ahead = append([]rdb.Entry{en}, w.r.ahead...)
			}
			return w.sleepPaused(marks, g.Pause())
		}
		cfg.Exec.Settled(w.unit.Handler, category, out)
		if !w.settle(en, out, h) {
			return false
		}
		w.active = time.Now()
		w.trimIf(false)
	}
	return false
}

// group is the consumer group w reads and acks its lanes through: its
// lease generation's, or the earlier layout's shared one (rdb.Lease.ReadGroup).
func (w *Worker) group() string { return w.held.Lease().ReadGroup() }

// heldHead returns the halted head to retry (ok), if w holds one.
func (w *Worker) heldHead() (rdb.Entry, bool) {
	if w.head == nil {
		return rdb.Entry{}, false
	}
	return *w.head, true
}

// parked reports whether the worker must stop: the lease ended or a
// release was asked for. A halted partition holds its head meanwhile: it
// waits HaltedRetryInterval and then goes on (the next read returns the
// head, for one more attempt), or, when its failure is permanent or
// retries are off, until it is released or its lease ends.
func (w *Worker) parked() bool {
	if w.held.Context().Err() != nil || w.releasing() {
		return true
	}
	w.mu.Lock()
	halted, permanent := w.halt != nil, w.halt != nil && w.halt.Permanent
	w.mu.Unlock()
	if !halted {
		return false
	}
	var retry <-chan time.Time
	if d := w.haltedRetry(); d > 0 && !permanent {
		t := time.NewTimer(d)
		defer t.Stop()
		retry = t.C
	}
	for {
		var realert <-chan time.Time
		var rt *time.Timer
		if d := w.cfg().HaltRealertInterval; d > 0 {
			w.mu.Lock()
			rt = time.NewTimer(time.Until(w.alertedAt.Add(d)))
			w.mu.Unlock()
			realert = rt.C
		}
		select {
		case <-w.held.Context().Done():
			return true
		case <-w.hand.release:
			return true
		case <-retry:
			return false
		case <-realert:
			w.realert()
		}
		if rt != nil {
			rt.Stop()
		}
	}
}

// realert reports w's halt again: it is still unresolved.
func (w *Worker) realert() {
	w.mu.Lock()
	if w.halt == nil {
		w.mu.Unlock()
		return
	}
	w.halt.Alerts++
	w.alertedAt = time.Now()
	h := *w.halt
	w.mu.Unlock()
	w.cfg().Log.Error("seqby: partition still halted; nothing later for the key is applied until an operator resolves it (seqbyctl halted, inspect, skip, dlq)",
		"handler", h.Handler, "category", h.Category, "key", h.Key, "stream", h.Stream, "entry", h.EntryID,
		"halted_for", time.Since(h.At).Round(time.Second), "alerts", h.Alerts, "reason", h.Reason, "err", h.Err)
	w.alert(h)
}

// reportHalt logs a partition's halt and alerts OnHalt.
func (w *Worker) reportHalt(h contract.Halt) {
	w.cfg().Log.Error("seqby: partition halted; its head stays pending and nothing later for the key is applied until an operator resolves it (seqbyctl halted, inspect, skip, dlq)",
		"handler", h.Handler, "category", h.Category, "key", h.Key, "stream", h.Stream,
		"entry", h.EntryID, "type", h.MessageType, "reason", h.Reason, "err", h.Err, "generation", h.Generation)
	w.alert(h)
}

// alert calls the Alert hook (OnHalt).
func (w *Worker) alert(h contract.Halt) {
	if a := w.cfg().Alert; a != nil {
		a(h)
	}
}

// haltedRetry is how often w's halted head is retried (0 or less: never).
func (w *Worker) haltedRetry() time.Duration {
	return w.cfg().Exec.Policy(w.unit.Handler).HaltedRetryInterval
}

// settle finishes one entry by its outcome: a halt is recorded and
// reported (the entry stays pending as the head), a processed entry is
// acked under the fence by the next read (or by flushAck as the worker
// ends), before anything else of the partition runs. False: the
// partition must end (lease lost, stopping, or fenced).
func (w *Worker) settle(en rdb.Entry, out executor.Outcome, h *contract.Halt) bool {
	switch out {
	case executor.OutLost:
		return false
	case executor.OutStop:
		w.stopped = &en
		return false
	case executor.OutHalt:
		if !w.ackBeforeHalt() {
			return false
		}
		h.Key, h.Generation = w.unit.Key, w.held.Lease().Generation
		w.mu.Lock()
		prev := w.halt
		if prev != nil {
			// A halted head failed its retry: still the same halt, already
			// reported and recorded.
			prev.Err, prev.Permanent = h.Err, h.Permanent
		} else {
			w.halt = h
		}
		w.mu.Unlock()
		w.head = &en
		if prev != nil {
			w.cfg().Log.Warn("seqby: the halted head failed again", "handler", w.unit.Handler, "stream", en.Stream, "entry", en.ID,
				"permanent", h.Permanent, "retry_in", w.haltedRetry(), "err", h.Err)
			return true
		}
		w.mu.Lock()
		h.Alerts, w.alertedAt = 1, time.Now()
		report := *h
		w.mu.Unlock()
		w.reportHalt(report)
		return w.recordHalt(h)
	}
	// In the strict mode the entry's effects (a fenced commit through the
	// engine's client, a pm's state) are on the replicas of the primary
	// the attempt started on before its ack goes: an ack answered by a
	// new primary for a commit the old one took with it would lose the
	// event. A new primary meanwhile ends the partition unacked, and the
	// next owner runs the entry again (the event in flight).
	if w.awaitReplicas(w.held.Context()) != nil {
		// It ran, and runs again at the next owner: no poison, so its
		// delivery goes back with it (MaxDeliveries) where the lease is
		// still this owner's.
		w.stopped = &en
		return false
	}
	// The ack rides on the next read (ackedPrevious), or is sent alone
	// before the next entry runs, or when the worker ends (flushAck).
	w.r.unacked = append(w.r.unacked, en)
	w.mu.Lock()
	recovered := w.halt
	w.halt = nil
	w.mu.Unlock()
	w.head = nil
	if recovered != nil {
		w.cfg().Log.Info("seqby: the halted head succeeded on a retry; the partition resumes", "handler", w.unit.Handler,
			"stream", en.Stream, "entry", en.ID, "halted_at", recovered.At)
	}
	return true
}

// ackBeforeHalt acks the entries a batched partition ran before the one
// it halts on, so the halted head is its oldest pending entry, as a
// successor's halt record check and the operators' tools expect (under
// the default promise they are acked already). False: the partition must
// end.
func (w *Worker) ackBeforeHalt() bool {
	for len(w.r.unacked) > 0 {
		err := w.ackUnacked()
		if err == nil || pausedBy(err) { // paused: acked all the same
			w.redisOK()
			return true
		}
		if !w.retryable(err) {
			return false
		}
	}
	return true
}

// awaitReplicas holds w's next attempt until its writes so far are on
// Options.ReplicaAcks replicas (a no-op in the default mode). A change of
// primary in between ends the partition (lost): it is claimed afresh.
// Only the worker's own goroutine calls it.
func (w *Worker) awaitReplicas(ctx context.Context) error {
	cfg := w.cfg()
	b := cfg.Replicas
	if b == nil {
		return nil
	}
	left := func() time.Duration { return time.Until(w.releasedAt().Add(w.releaseGrace())) }
	at, err := b.Await(ctx, b.SlotOf(w.held.Lease().Ref.Key), w.held.DurableAt, time.Now(), w.hand.release, left)
	if errors.Is(err, replicas.ErrPrimaryChanged) {
		w.held.Lost(err)
		return err
	}
	if errors.Is(err, replicas.ErrGaveUp) {
		cfg.Log.Warn("seqby: handing over without confirming the partition's last writes on replicas; the entry in hand, if any, runs again at the next owner",
			"handler", w.unit.Handler, "stream", w.unit.Lanes[0], "replica_acks", cfg.ReplicaAcks)
		return err
	}
	if err != nil {
		return err
	}
	w.held.DurableAt = at
	return nil
}

// Retention: a stream keeps only what some consumer group of its category
// has not acked, so an idle, fully handled partition ends empty. Every
// worker that acks trims its own lanes, batched: after TrimEvery acks,
// and when it finds its lanes drained (Trims counts; Config.Trim trims).

// TrimEvery is how many acks a worker makes before it trims while busy.
const TrimEvery = 100

// trimQuiet spaces the trims of a worker that keeps finding its lanes
// drained: a trim costs a round trip per lane, and a partition that gets
// an event now and then drains after each one.
const trimQuiet = time.Second

// Trims counts a worker's acks since its last trim.
type Trims struct {
	acks int
	last time.Time // the last trim tried
}

// Acked counts one ack.
func (t *Trims) Acked() { t.acks++ }

// Inherit makes a trim due once the lanes are drained, though this
// worker acked nothing yet: what its predecessors acked may be there.
func (t *Trims) Inherit() { t.acks = max(t.acks, 1) }

// Due reports whether the worker should trim now: it acked every
// entries (TrimEvery, or more for a batched partition: see
// Worker.trimIf), or it found its lanes drained after acking any and its
// last trim is trimQuiet old.
func (t *Trims) Due(drained bool, every int) bool {
	return t.acks >= every || drained && t.acks > 0 && time.Since(t.last) >= trimQuiet
}

// Tried records a trim just tried, which reset the count if ok. A failed
// trim stays due, retried trimQuiet later (not at once: a drained
// partition would spin on it), so an idle partition does not keep its
// acked entries (and never turn cold) until it acks again.
func (t *Trims) Tried(ok bool) {
	t.last = time.Now()
	if ok {
		t.acks = 0
	}
}

// wait is how long a drained worker may wait before its trim is due (0:
// none is pending): its idle wait ends by then, so what it acked is
// trimmed (and the partition can turn cold) without waiting for more work.
func (t *Trims) wait() time.Duration {
	if t.acks == 0 {
		return 0
	}
	return max(trimQuiet-time.Since(t.last), time.Millisecond)
}

// trimIf runs retention on w's lanes when it is due (drained: the last
// read found them empty).
func (w *Worker) trimIf(drained bool) {
	// A batched partition trims every 10 batches: a trim costs a round
	// trip per lane, which, every TrimEvery acks, would outnumber its
	// reads (one per batch).
	if !w.trims.Due(drained, max(TrimEvery, 10*w.unit.AckBatch)) {
		return
	}
	w.cfg().Trim(w.held.Context(), w.unit.Handler, &w.trims, w.unit.LaneCats, w.unit.Lanes)
}

// cfg is the Set's Config.
func (w *Worker) cfg() *Config { return &w.set.cfg }

// observeWork records what the metrics see of w's work after a read: en,
// when ok, is the oldest entry w has not handled, and the entries read
// ahead wait behind it.
func (w *Worker) observeWork(en rdb.Entry, ok, more bool) {
	if !ok {
		w.lag.Clear()
		return
	}
	w.lag.Set(en.ID, int64(len(w.r.ahead))+1, more)
}

// redisOK resets the Redis error counts after a call succeeded.
func (w *Worker) redisOK() { w.redisErrs = redisErrs{} }

// handlerResumed notes, at the worker's loop top, that the handler's
// pause it slept through has ended.
func (w *Worker) handlerResumed() {
	if w.pause.handler.Swap(false) {
		w.unpaused()
	}
}

// unpaused notes that a confirmation found the partition running again.
func (w *Worker) unpaused() {
	if w.pause.paused.Swap(false) {
		w.cfg().Log.Info("seqby: partition resumed", "handler", w.unit.Handler, "partition", w.unit.Key, "stream", w.unit.Lanes[0])
	}
}

// acked removes the prior halt record once its head was acked: the
// partition has moved past it.
func (w *Worker) acked(en rdb.Entry) {
	if w.prior == nil || en.Stream != w.prior.stream || en.ID != w.prior.id {
		return
	}
	ctx, cancel := context.WithTimeout(w.held.Context(), w.cfg().LeaseTTL)
	defer cancel()
	w.clearHalt(ctx, w.prior.raw)
	w.prior = nil
}

// hasHaltRecord reports whether en is a head with a halt record: the
// head w halted on, or the one a predecessor's record names.
func (w *Worker) hasHaltRecord(en rdb.Entry) bool {
	if w.head != nil && w.head.Stream == en.Stream && w.head.ID == en.ID {
		return true
	}
	return w.prior != nil && w.prior.stream == en.Stream && w.prior.id == en.ID
}

// pausedBy reports whether err says the partition is paused.
func pausedBy(err error) bool { return errors.Is(err, rdb.ErrPaused) }

// Halted reports whether w is halted on its head.
func (w *Worker) Halted() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.halt != nil
}

func (w *Worker) releasing() bool {
	select {
	case <-w.hand.release:
		return true
	default:
		return false
	}
}
