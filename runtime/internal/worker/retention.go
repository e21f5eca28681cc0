package worker

import "time"

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
