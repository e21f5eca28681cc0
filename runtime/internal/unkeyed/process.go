package unkeyed

import (
	"context"
	"errors"
	"time"

	"github.com/seqby/seqby/runtime/internal/contract"
	"github.com/seqby/seqby/runtime/internal/executor"
	"github.com/seqby/seqby/runtime/internal/rdb"
)

// process handles one entry. After exhausted retries it stays pending on
// this consumer and the worker moves on (no order promised): the halt is
// reported once, and this instance never runs the entry again.
func (u *worker) process(en rdb.Entry) {
	r := u.r
	if u.st.isHalted(en.Stream, en.ID) {
		return
	}
	began := time.Now()
	out, h := r.cfg.Exec.Handle(u.base, u.stop, r.cfg.Exec.Slots(), u.handler, u.category, en, false)
	r.cfg.Exec.Settled(u.handler, u.category, out)
	switch out {
	case executor.OutDone, executor.OutSkip:
		if !u.replicated(en, began) {
			return // pending: it runs again, here or elsewhere
		}
		ctx, cancel := context.WithTimeout(u.base, 5*time.Second)
		if err := rdb.Ack(ctx, r.cfg.Client, en.Stream, u.handler, en.ID); err != nil {
			r.cfg.Log.Warn("seqby: ack failed; the entry will be re-run", "handler", u.handler, "stream", en.Stream, "entry", en.ID, "err", err)
		} else {
			u.trims.Acked()
		}
		cancel()
	case executor.OutHalt:
		h.Key = u.key
		// An entry left for another build is decided again at the next
		// retry of this consumer's pending entries: once no live build
		// routes its type, this build's own rule applies.
		if !errors.Is(h.Err, contract.ErrRoutedByAnotherBuild) {
			u.st.markHalted(en.Stream, en.ID)
		}
		if r.noteHalt(*h) {
			r.reportHalt(*h)
		}
	}
}

// replicated, in the strict mode, waits until what en's handler committed
// through the engine's client is on Options.ReplicaAcks replicas of the
// primary it began on, so an ack answered by a new primary never stands
// for a commit the old one took with it. False: do not ack (a new
// primary, or no acknowledgement within LeaseTTL), and the entry runs
// again.
func (u *worker) replicated(en rdb.Entry, began time.Time) bool {
	b := u.r.cfg.Replicas
	if b == nil {
		return true
	}
	ctx, cancel := context.WithTimeout(u.base, u.r.cfg.LeaseTTL)
	defer cancel()
	if _, err := b.Await(ctx, b.SlotOf(en.Stream), began, time.Now(), nil, nil); err != nil {
		u.r.cfg.Log.Warn("seqby: not acking an entry whose effects are not confirmed on replicas; it runs again", "handler", u.handler, "stream", en.Stream, "entry", en.ID, "err", err)
		return false
	}
	return true
}
