package worker

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/seqby/seqby/runtime/internal/rdb"
)

// An idle partition keeps no goroutine: thousands of partitions with
// nothing to do cost their state, not a stack each. sleep arms what ends
// the idleness (a wake-up signal for the key, a release asked for, the
// end of the lease's context, the safety-net re-read) as callbacks; the
// first to fire starts resume on a new goroutine, which disarms the others
// first. The worker goroutine that called sleep returns right after it.

// sleep leaves the partition idle until a signal for its key in one of
// cats counted after the matching mark, a release, the end of the
// lease's context, or d passes.
func (w *Worker) sleep(d time.Duration, cats []string, marks []uint64) {
	w.sleepUntil(d, cats, marks, nil)
}

// sleepUntil is sleep that also ends when until does (nil: never), and
// with no timer when d is not positive.
func (w *Worker) sleepUntil(d time.Duration, cats []string, marks []uint64, until context.Context) {
	cfg := w.cfg()
	var (
		armed  sync.Mutex // held while arming: a wake waits for it
		once   sync.Once
		timer  *time.Timer
		stop   func() bool
		stop2  func() bool
		cancel []func()
	)
	wake := func() {
		once.Do(func() {
			go func() {
				armed.Lock()
				if timer != nil {
					timer.Stop()
				}
				stop()
				if stop2 != nil {
					stop2()
				}
				for _, c := range cancel {
					c()
				}
				armed.Unlock()
				w.hand.mu.Lock()
				w.hand.onRelease = nil
				w.hand.mu.Unlock()
				w.resume()
			}()
		})
	}
	armed.Lock()
	defer armed.Unlock()
	if d > 0 {
		timer = time.AfterFunc(d, wake)
	}
	stop = context.AfterFunc(w.held.Context(), wake)
	if until != nil {
		stop2 = context.AfterFunc(until, wake)
	}
	for i, c := range cats {
		cancel = append(cancel, cfg.Wake.Notify(c, w.unit.Key, marks[i], wake))
	}
	w.hand.mu.Lock()
	if w.releasing() {
		w.hand.mu.Unlock()
		wake()
		return
	}
	w.hand.onRelease = wake
	w.hand.mu.Unlock()
}

// IdleRecheck is a safety net re-read of an idle partition, should a
// wake-up signal never have been written (a publisher that died between
// the entry and its signal on a cluster); signals normally wake it, and
// a reader that lost signals to the stream's cap wakes every partition
// (wake.Waiter).
const IdleRecheck = 30 * time.Second

// idleRecheckEach spaces the safety net re-reads of an instance with many
// idle partitions (idleWait).
const idleRecheckEach = time.Second

// idleWait is how long an idle worker waits for a signal before it
// re-reads: IdleRecheck, or idleRecheckEach per partition this instance
// owns if that is longer (so an instance re-reads about one idle
// partition a second at most, however many it owns), give or take a
// fifth (so the re-reads of partitions that went idle together spread out
// instead of arriving in one burst); or less when its partition turns cold
// sooner, or its acked entries are due to be trimmed (Trims.wait).
func (w *Worker) idleWait() time.Duration {
	d := w.safetyNet()
	if t := w.trims.wait(); t > 0 {
		d = min(d, t)
	}
	if r := w.cfg().ReapAfter; r > 0 {
		d = min(d, max(time.Until(w.active.Add(r)), time.Millisecond))
	}
	return d
}

// safetyNet is idleWait without its early ends: the wait of a paused
// partition, which neither trims nor turns cold while paused (a read
// finds the pause, and the cold release refuses), so waking sooner would
// only read the pause again.
func (w *Worker) safetyNet() time.Duration {
	owned := w.set.Len()
	base := max(IdleRecheck, time.Duration(owned)*idleRecheckEach)
	return base - base/5 + rand.N(2*base/5)
}

// releaseCold lets the partition go when it has been idle here for
// ReapAfter (reaping is on: ReapAfter > 0) and Redis finds it cold;
// true: the worker must end.
func (w *Worker) releaseCold() bool {
	cfg := w.cfg()
	if cfg.ReapAfter <= 0 || time.Since(w.active) < cfg.ReapAfter {
		return false
	}
	ok, err := w.held.Lease().ReleaseCold(w.held.Context(), cfg.Client, cfg.ReapAfter, w.unit.Lanes)
	switch {
	case errors.Is(err, rdb.ErrFenced):
		w.held.Lost(err)
		return true
	case err != nil:
		if w.held.Context().Err() == nil {
			cfg.Log.Warn("seqby: releasing a cold partition failed; keeping it for now", "handler", w.unit.Handler, "stream", w.unit.Lanes[0], "err", err)
		}
	case ok:
		w.held.SetGone()
		// Debug: partitions idle since the same burst go cold together;
		// the reaper's pass logs how many it reaped.
		cfg.Log.Debug("seqby: released a cold partition for the reaper", "handler", w.unit.Handler, "partition", w.unit.Key, "idle_for", cfg.ReapAfter)
		return true
	}
	w.active = time.Now() // not cold (or unknown): look again after ReapAfter
	return false
}
