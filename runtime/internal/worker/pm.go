package worker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/seqby/seqby/runtime/internal/contract"
	"github.com/seqby/seqby/runtime/internal/executor"
	"github.com/seqby/seqby/runtime/internal/lease"
	"github.com/seqby/seqby/runtime/internal/rdb"
	"github.com/seqby/seqby/runtime/internal/telemetry"
)

// A sequential process manager is consumed per correlation value: one
// engine instance leases (pm, X) and is the sole processor of X's streams
// in every category the pm handles (category:{X} and its backfill lane),
// applying their entries one at a time, oldest first. The lease, its
// fence and failover are the keyed handlers'; only the scope differs: a
// correlation value instead of one stream, read by pmReader.

// pmReader reads a pm's correlation value: the oldest entry across its
// lanes, one at a time.
type pmReader struct{}

// next returns the halted head, or the entry a pause stopped before its
// attempt, or else the oldest entry across the lanes, read fenced with
// the ack of the entry run before (ok false: none). A read that
// succeeded, or found the partition paused, did that ack.
func (pmReader) next(w *Worker, _ []uint64) (en rdb.Entry, ok bool, confirmed time.Time, err error) {
	en, ok = w.heldHead()
	if !ok && len(w.r.ahead) > 0 {
		// The entry a pause stopped before its attempt: still
		// delivered here, it runs first (confirmed anew by its gate).
		en, ok = w.r.ahead[0], true
		w.r.ahead = w.r.ahead[1:]
	} else if !ok {
		confirmed = time.Now()
		en, ok, err = w.cfg().Batch.ReadOldest(w.held.Context(), w.held.Lease(), w.group(), w.unit.Lanes, w.unit.Primaries, w.r.unacked)
		if err == nil {
			w.unpaused()
		}
	}
	if pausedBy(err) {
		w.ackedPrevious() // the ack it carried was done
		return rdb.Entry{}, false, time.Time{}, err
	}
	if err != nil {
		return rdb.Entry{}, false, time.Time{}, err
	}
	w.ackedPrevious()
	return en, ok, confirmed, nil
}

// idleMarks: a drained pm worker waits for a signal counted after the
// marks of its last turn.
func (pmReader) idleMarks(_ *Worker, marks []uint64) []uint64 { return marks }

// handle applies one entry to the pm instance of w's correlation value
// through the executor: load its state, call the handle method with the
// correlation value in ctx, save the state (fenced by the lease),
// retrying handler failures with backoff up to MaxRetries before halting
// the correlation value. Store failures other than a version conflict are
// Redis trouble, not the message's fault: they are retried while the
// lease holds and never halt. It stays apart from executor.Handle for
// what it shares with its partition: the lease lost to a fenced save, the
// halted head, the release that stops a backoff.
func (pmReader) handle(w *Worker, g *lease.Gate, category string, en rdb.Entry) (executor.Outcome, *contract.Halt) {
	cfg := w.cfg()
	name := w.unit.Handler
	halt := func(reason string, err error) (executor.Outcome, *contract.Halt) {
		return executor.OutHalt, cfg.Exec.Halt(name, category, en, reason, err)
	}
	rt, m, skip, h := cfg.Exec.Decode(name, category, en)
	switch {
	case h != nil:
		return executor.OutHalt, h
	case skip:
		return executor.OutSkip, nil
	}
	corr, err := executor.Correlate(rt, m)
	if err != nil {
		return halt("no correlation value", contract.Permanent(err))
	}
	if corr != w.unit.Key {
		return halt("correlation value differs from the partition key",
			contract.Permanent(fmt.Errorf("entry on %s correlates to %q, not %q: the route's Correlate and PartitionKey must read the same field; regenerate with seqgen", en.Stream, corr, w.unit.Key)))
	}
	ctx := executor.WithCorrelation(w.held.Context(), corr)
	policy := cfg.Exec.Policy(name)
	if w.Halted() {
		policy.MaxRetries = 0 // a halted head: one attempt
	}
	backoff := policy.RetryBackoff
	failures := 0
	for attempt := 1; ; attempt++ {
		var infra bool
		switch g.Enter(w.held.Context()) {
		case executor.Paused:
			return executor.OutPause, nil
		case executor.Stopped:
			return executor.OutStop, nil
		case executor.Refused:
			return executor.OutLost, nil
		}
		err = cfg.Exec.Attempt(ctx, name, category, en, attempt, func(ctx context.Context) error {
			var err error
			infra, err = cfg.Exec.ApplyPM(ctx, name, rt, corr, m, &en)
			return err
		})
		infra = infra && !errors.Is(err, contract.ErrHandlerTimeout)
		g.Leave(err == nil)
		if err == nil {
			return executor.OutDone, nil
		}
		if errors.Is(err, rdb.ErrFenced) {
			w.held.Lost(err)
			return executor.OutLost, nil
		}
		if w.held.Context().Err() != nil {
			return executor.OutLost, nil
		}
		if errors.Is(err, contract.ErrPermanent) {
			return halt("pm failed permanently", err)
		}
		// An infrastructure error (the state store) is retried without
		// counting, unless it cannot pass by itself (rdb.Permanent:
		// WRONGTYPE on the state key, an ACL refusal), which counts like a
		// pm failure and so ends in a reported halt.
		if !infra || w.Halted() || rdb.Permanent(err) {
			failures++
			if failures > policy.MaxRetries {
				return halt(fmt.Sprintf("pm failed %d times", failures), err)
			}
		}
		cfg.Telemetry.Event(ctx, name, category, telemetry.OutcomeRetried)
		cfg.Log.Warn("seqby: pm failed; retrying", "handler", name, "correlation", corr, "stream", en.Stream,
			"entry", en.ID, "failures", failures, "backoff", backoff, "err", err)
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-w.held.Context().Done():
			t.Stop()
			return executor.OutLost, nil
		case <-w.hand.release:
			t.Stop()
			return executor.OutStop, nil
		}
		backoff = min(2*backoff, policy.MaxBackoff)
	}
}
