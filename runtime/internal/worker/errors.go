package worker

import (
	"errors"
	"strings"
	"time"

	"github.com/seqby/seqby/runtime/internal/membership"
	"github.com/seqby/seqby/runtime/internal/rdb"
)

// releaseGrace bounds how long a worker asked to hand over (or to stop
// with Run) keeps retrying a failing Redis call before it gives up and
// leaves the entry to the next owner: Run returns within a bounded time
// whatever Redis does.
func (w *Worker) releaseGrace() time.Duration { return w.cfg().LeaseTTL }

// retryable handles a Redis error of a partition worker. Fenced (or a
// lost lease) ends the partition. A permanent error counts toward
// PermanentErrors, after which the partition is released (a fault).
// Otherwise it waits a backoff that doubles from RetryBackoff to MaxBackoff
// and returns true to retry, while the lease lasts and, once a handover or
// shutdown was asked for, for at most releaseGrace.
func (w *Worker) retryable(err error) bool {
	cfg := w.cfg()
	if errors.Is(err, rdb.ErrFenced) {
		w.held.Lost(err)
		return false
	}
	if w.held.Context().Err() != nil {
		return false
	}
	permanent := rdb.Permanent(err)
	if permanent {
		w.redisErrs.permanent++
		if w.redisErrs.permanent >= cfg.PermanentErrors {
			w.releaseFaulted(err)
			return false
		}
	}
	w.redisErrs.backoff = min(max(2*w.redisErrs.backoff, cfg.RetryBackoff), cfg.MaxBackoff)
	cfg.Log.Warn("seqby: redis error; retrying", "handler", w.unit.Handler, "stream", w.unit.Lanes[0], "permanent", permanent,
		"retry_in", w.redisErrs.backoff, "err", err)
	return w.backoff(w.redisErrs.backoff)
}

// backoff waits d; false when the partition must end meanwhile: its lease
// ended, or it was asked to hand over longer than releaseGrace ago.
func (w *Worker) backoff(d time.Duration) bool {
	for {
		release := w.hand.release
		if w.releasing() {
			release = nil
			left := time.Until(w.releasedAt().Add(w.releaseGrace()))
			if left <= 0 {
				w.cfg().Log.Warn("seqby: giving up on redis while handing over; the entry in hand, if any, is processed again by the next owner",
					"handler", w.unit.Handler, "stream", w.unit.Lanes[0])
				return false
			}
			d = min(d, left)
		}
		t := time.NewTimer(d)
		select {
		case <-t.C:
			return true
		case <-w.held.Context().Done():
			t.Stop()
			return false
		case <-release:
			t.Stop()
		}
	}
}

// redisOK resets the Redis error counts after a call succeeded.
func (w *Worker) redisOK() { w.redisErrs = redisErrs{} }

// redisErrs counts a worker's Redis errors since its last success. Only
// the partition's own goroutine touches it.
type redisErrs struct {
	permanent int
	backoff   time.Duration
}

// releaseFaulted reports that w gives up for permanent Redis errors: the
// instance record benches it for FaultBench (discovery does not claim it)
// and counts it toward this instance's stall, so others take it.
func (w *Worker) releaseFaulted(err error) {
	cfg := w.cfg()
	now := time.Now()
	category := strings.Join(w.unit.Cats, ",")
	cfg.Members.Release(w.unit.ID, membership.Fault{Kind: membership.FaultReleased, Handler: w.unit.Handler, Category: category, Key: w.unit.Key,
		Stream: w.unit.Lanes[0], Err: err, Since: now, Until: now.Add(cfg.FaultBench)})
}
