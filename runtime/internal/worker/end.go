package worker

import (
	"context"
	"errors"

	"github.com/seqby/seqby/runtime/internal/rdb"
	"github.com/seqby/seqby/runtime/internal/sleep"
)

// begin reclaims the past owners' pending entries, so they are applied
// first, and settles a halt record left by a predecessor. False: the
// partition must end.
func (w *Worker) begin() bool {
	// A predecessor may have acked entries and let the partition go
	// before trimming them: trim once drained here too, or the lanes
	// never empty and the partition never turns cold until its key's
	// next publish.
	w.trims.Inherit()
	return w.reclaim() && w.checkHaltRecord()
}

// finish releases the lease and forgets the partition. A lease counted
// lost only by the local deadline may still hold this token in Redis (a
// renew that timed out here but was applied there extends it by a full
// TTL), so it is released too: the release is compare-and-delete, which
// never removes a successor's lease. Only a lease Redis already reported
// gone is left alone.
func (w *Worker) finish() {
	cfg := w.cfg()
	if w.r.prefetch != nil && w.held.Context().Err() == nil {
		// A graceful end: take the prefetch's entries, so the release
		// hands them on with the others held (handing). On an error they
		// stay pending here, and the next owner reclaims them.
		ctx, cancel := context.WithTimeout(w.held.Context(), w.releaseGrace())
		if err := w.collect(ctx); errors.Is(err, rdb.ErrFenced) {
			w.held.Lost(err)
		}
		cancel()
	}
	w.flushAck()
	if !w.held.End() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(w.held.Context()), cfg.LeaseTTL)
		if err := w.held.Lease().ReleaseHanding(ctx, cfg.Client, w.unit.Lanes, w.handing()); err != nil {
			cfg.Log.Warn("seqby: release failed; the lease will expire after its TTL, and the partition's next owner waits for that", "handler", w.unit.Handler, "stream", w.unit.Lanes[0], "err", err)
		} else {
			cfg.Log.Debug("seqby: released", "handler", w.unit.Handler, "partition", w.unit.Key, "stream", w.unit.Lanes[0])
		}
		cancel()
	}
	w.reportLossOrResolution()
	w.held.Cancel(errors.New("partition stopped"))
	for _, c := range w.unit.Cats {
		cfg.Wake.Forget(c, w.unit.Key)
	}
	w.set.remove(w)
	if w.onFinish != nil {
		w.onFinish()
	}
}

// handing is what a graceful release hands on that is pending under this
// owner and not in flight (release.lua gives their deliveries back): the
// halted head, the entry whose retries a handover stopped, the entries
// read ahead and never run.
func (w *Worker) handing() []rdb.Entry {
	var out []rdb.Entry
	if w.head != nil {
		out = append(out, *w.head)
	}
	if w.stopped != nil {
		out = append(out, *w.stopped)
	}
	return append(out, w.r.ahead...)
}

// flushAck sends the acks of w.r.unacked on their own as the worker ends,
// unless Redis already said the lease is gone: fenced, so it is safe even
// after the local deadline cancelled the lease's context. It retries for
// at most releaseGrace; if it fails, the entries run again on the next owner
// (at-least-once), never out of order: the next owner reclaims them
// first.
func (w *Worker) flushAck() {
	if len(w.r.unacked) == 0 || w.held.Gone() {
		return
	}
	cfg := w.cfg()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(w.held.Context()), w.releaseGrace())
	defer cancel()
	for backoff := cfg.RetryBackoff; ; backoff = min(2*backoff, cfg.MaxBackoff) {
		err := rdb.FencedAckEntries(ctx, cfg.Client, w.held.Lease(), w.group(), w.r.unacked)
		if err == nil || pausedBy(err) { // paused: acked all the same
			w.ackedPrevious()
			return
		}
		if errors.Is(err, rdb.ErrFenced) || rdb.Permanent(err) || !sleep.For(ctx, backoff) {
			last := w.r.unacked[len(w.r.unacked)-1]
			cfg.Log.Warn("seqby: processed entries were not acked; their next owner runs them again", "handler", w.unit.Handler, "stream", last.Stream, "entries", len(w.r.unacked), "last_entry", last.ID, "err", err)
			return
		}
	}
}

// reclaim moves the past owners' pending entries on every lane to this
// owner, so they are applied first. False: the partition must end.
func (w *Worker) reclaim() bool {
	cfg := w.cfg()
	for {
		n, err := rdb.Reclaim(w.held.Context(), cfg.Client, w.held.Lease(), w.group(), w.unit.Lanes)
		if err == nil {
			w.redisOK()
			if n > 0 {
				cfg.Telemetry.EntriesReclaimed(w.unit.Handler, n)
				cfg.Log.Info("seqby: reclaimed pending entries of past owners", "handler", w.unit.Handler, "partition", w.unit.Key, "stream", w.unit.Lanes[0], "entries", n, "token", w.held.Lease().Token())
			}
			return true
		}
		if !w.retryable(err) {
			return false
		}
	}
}
