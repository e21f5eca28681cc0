package runtime

import (
	"context"
	"errors"
	"time"
)

// A handler attempt, first or retry, starts only while its partition's
// lease is known to hold: the fenced read that returned the entry verified
// it, and an attempt that waited longer than verifyAfter since (for a
// retry's backoff, or for a concurrency slot) verifies it again in Redis
// first. An attempt never starts with its context done. So a stale owner
// never starts another attempt after losing the partition; only a body
// already running when the lease was lost can finish late (its context is
// cancelled then, and its commits are fenced if it uses LeaseFromContext).

// verifyAfter is how long after the last verification an attempt may
// start without verifying the lease again.
const verifyAfter = 10 * time.Millisecond

// gate admits one entry's handler attempts: a concurrency slot, a live
// context, and a lease verified within verifyAfter.
type gate struct {
	e *Engine
	// verify checks the lease in Redis (ErrFenced when lost); nil for
	// handlers without a lease (unkeyed).
	verify   func(context.Context) error
	verified time.Time
}

// newGate is a gate for an entry just returned by a fenced read.
func (e *Engine) newGate(verify func(context.Context) error) *gate {
	return &gate{e: e, verify: verify, verified: time.Now()}
}

// enter waits for a concurrency slot and reports whether the attempt may
// start; then the caller holds the slot and must call leave. False: ctx
// ended or the lease is lost, and nothing is held. A Redis error while
// verifying is retried with backoff, without the slot, while ctx lasts:
// the attempt waits rather than starts unverified.
func (g *gate) enter(ctx context.Context) bool {
	backoff := g.e.o.RetryBackoff
	for {
		select {
		case g.e.sem <- struct{}{}:
		case <-ctx.Done():
			return false
		}
		if ctx.Err() != nil {
			g.leave()
			return false
		}
		if g.verify == nil || time.Since(g.verified) <= verifyAfter {
			return true
		}
		err := g.verify(ctx)
		if err == nil {
			g.verified = time.Now()
			return true
		}
		g.leave()
		if errors.Is(err, ErrFenced) || ctx.Err() != nil {
			return false
		}
		g.e.log.Warn("seqby: cannot verify the lease before a handler attempt; waiting", "err", err, "backoff", backoff)
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return false
		}
		backoff = min(2*backoff, g.e.o.MaxBackoff)
	}
}

// leave frees the concurrency slot enter took.
func (g *gate) leave() { <-g.e.sem }

// verifyLease checks p's lease in Redis; a lost one ends the partition.
func (p *partition) verifyLease(ctx context.Context) error {
	err := p.lease.Verify(ctx, p.e.c)
	if errors.Is(err, ErrFenced) {
		p.lost(err)
	}
	return err
}
