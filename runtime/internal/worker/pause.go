package worker

import (
	"context"
	"errors"
	"sync/atomic"

	"github.com/seqby/seqby/runtime/internal/lease"
	"github.com/seqby/seqby/runtime/internal/rdb"
)

// pauseFlags say whether an operator's pause stopped a worker.
type pauseFlags struct {
	// paused: the last confirmation found the partition paused by an
	// operator, or its handler is; it sleeps until resumed.
	paused atomic.Bool
	// handler: paused by its handler's pause.
	handler atomic.Bool
}

// pausedBy reports whether err says the partition is paused.
func pausedBy(err error) bool { return errors.Is(err, rdb.ErrPaused) }

// sleepPaused leaves the partition idle while it is paused, and returns
// true (the worker sleeps). It first acks what ran (a batched partition
// may hold acks; the handler's pause is not in the scripts, so nothing
// acked them). A key's pause ends with a wake-up signal for the key
// counted after marks (one per category of the partition: a pm value has
// several; Resume sends one once the mark is gone); a handler's when hp's
// context ends; a release or the end of the lease ends either. It sleeps
// with no other timer than the idle safety net's (safetyNet: a due trim
// or cold release would only read the pause again), whose re-read
// (should Resume's signal be lost) finds the pause still there, or gone.
func (w *Worker) sleepPaused(marks []uint64, hp *lease.HandlerPause) bool {
	if len(w.r.unacked) > 0 {
		if err := w.ackUnacked(); err != nil && !pausedBy(err) {
			w.cfg().Log.Debug("seqby: acking before a pause failed; the acks go with the next read", "handler", w.unit.Handler, "stream", w.unit.Lanes[0], "err", err)
		}
	}
	w.pause.handler.Store(hp != nil)
	if !w.pause.paused.Swap(true) {
		w.cfg().Log.Info("seqby: partition paused by an operator; the entry in flight finished, no later one starts until it is resumed",
			"handler", w.unit.Handler, "partition", w.unit.Key, "stream", w.unit.Lanes[0], "handler_paused", hp != nil)
	}
	var until context.Context
	if hp != nil {
		until = hp.Context()
	}
	w.sleepUntil(w.safetyNet(), w.unit.Cats, marks, until)
	return true
}

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
