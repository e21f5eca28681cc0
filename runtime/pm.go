package runtime

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
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
// fence and failover are the keyed handlers' (internal/rdb,
// partition.go); only the scope differs: a correlation value instead of
// one stream.

// pmPartitionID cannot collide with partitionID(group, stream): a stream
// name never starts with NUL.
func pmPartitionID(pm, correlation string) string { return pm + "\x00\x00" + correlation }

// newPMPartition wraps an acquired lease on pm's correlation value.
func (e *Engine) newPMPartition(base context.Context, reg Registration, cats []string, correlation string, l rdb.Lease, acquiredAt time.Time) *partition {
	p := &partition{
		e: e, id: pmPartitionID(reg.Name, correlation), reg: reg, key: correlation,
		cats: cats, primaries: len(cats), release: make(chan struct{}), active: time.Now(),
	}
	for _, c := range cats {
		p.lanes = append(p.lanes, rdb.PartitionStream(c, correlation))
		p.laneCats = append(p.laneCats, c)
	}
	for _, c := range cats {
		p.lanes = append(p.lanes, rdb.BackfillStream(c, correlation, e.o.BackfillSuffix))
		p.laneCats = append(p.laneCats, c)
	}
	p.held = e.leases.Hold(base, lease.Ident{Handler: reg.Name, Key: correlation, Cats: cats, Stream: p.lanes[0]}, l, acquiredAt, p.hooks())
	return p
}

// runPM works a pm's correlation value until it is released, its lease
// is lost, or it is fenced: reclaim the past owners' pending entries on
// every lane, then apply one entry at a time, oldest first across lanes.
func (p *partition) runPM() { p.start((*partition).workPM) }

// workPM is runPM's worker loop (see partition.work).
func (p *partition) workPM() (asleep bool) {
	e := p.e
	marks := make([]uint64, len(p.cats))
	for !p.parked() {
		for i, c := range p.cats {
			marks[i] = e.wake.Mark(c, p.key)
		}
		if hp := e.pauses.Paused(p.reg.Name); hp != nil {
			return p.sleepPaused(marks, hp)
		}
		p.handlerResumed()
		var confirmed time.Time // when the fenced read was sent (the fence rule)
		en, ok, err := p.heldHead()
		if !ok && len(p.ahead) > 0 {
			// The entry a pause stopped before its attempt: still
			// delivered here, it runs first (confirmed anew by its gate).
			en, ok = p.ahead[0], true
			p.ahead = p.ahead[1:]
		} else if !ok {
			confirmed = time.Now()
			en, ok, err = e.batch.ReadOldest(p.held.Context(), p.held.Lease(), p.reg.Name, p.lanes, p.primaries, p.unacked)
			if err == nil {
				p.unpaused()
			}
		}
		if pausedBy(err) {
			p.ackedPrevious() // the ack it carried was done
			return p.sleepPaused(marks, nil)
		}
		if err != nil {
			if !p.retryable(err) {
				return false
			}
			continue
		}
		p.redisOK()
		p.ackedPrevious()
		p.observeWork(en, ok, true)
		if !ok {
			p.trimIf(true)
			if p.releaseCold() {
				return false
			}
			p.sleep(p.idleWait(), p.cats, marks)
			return true
		}
		p.held.NameIf(en)
		category := p.laneCats[max(slices.Index(p.lanes, en.Stream), 0)]
		out, h := executor.OutHalt, e.exec.OverDelivered(p.reg.Name, category, en)
		var g *lease.Gate
		if h == nil {
			g = p.held.Gate(confirmed, p.hasHaltRecord(en))
			out, h = e.handlePM(p, g, category, en)
		}
		if out == executor.OutPause {
			if p.head == nil {
				p.ahead = append([]rdb.Entry{en}, p.ahead...)
			}
			return p.sleepPaused(marks, g.Pause())
		}
		e.countSettled(p.reg.Name, category, out)
		if !p.settle(en, out, (*Halt)(h)) {
			return false
		}
		p.active = time.Now()
		p.trimIf(false)
	}
	return false
}

// handlePM applies one entry to the pm instance of p's correlation value
// through the executor: load its state, call the handle method with the
// correlation value in ctx, save the state (fenced by the lease),
// retrying handler failures with backoff up to MaxRetries before halting
// the correlation value. Store failures other than a version conflict are
// Redis trouble, not the message's fault: they are retried while the
// lease holds and never halt. It stays apart from executor.Handle for
// what it shares with its partition: the lease lost to a fenced save, the
// halted head, the release that stops a backoff.
func (e *Engine) handlePM(p *partition, g *lease.Gate, category string, en rdb.Entry) (executor.Outcome, *contract.Halt) {
	reg := p.reg
	halt := func(reason string, err error) (executor.Outcome, *contract.Halt) {
		return executor.OutHalt, e.exec.Halt(reg.Name, category, en, reason, err)
	}
	rt, m, skip, h := e.exec.Decode(reg.Name, category, en)
	switch {
	case h != nil:
		return executor.OutHalt, h
	case skip:
		return executor.OutSkip, nil
	}
	corr, err := executor.Correlate(rt, m)
	if err != nil {
		return halt("no correlation value", Permanent(err))
	}
	if corr != p.key {
		return halt("correlation value differs from the partition key",
			Permanent(fmt.Errorf("entry on %s correlates to %q, not %q: the route's Correlate and PartitionKey must read the same field; regenerate with seqgen", en.Stream, corr, p.key)))
	}
	ctx := WithCorrelation(p.held.Context(), corr)
	policy := e.exec.Policy(reg.Name)
	if p.isHalted() {
		policy.MaxRetries = 0 // a halted head: one attempt
	}
	backoff := policy.RetryBackoff
	failures := 0
	for attempt := 1; ; attempt++ {
		var infra bool
		switch g.Enter(p.held.Context()) {
		case executor.Paused:
			return executor.OutPause, nil
		case executor.Stopped:
			return executor.OutStop, nil
		case executor.Refused:
			return executor.OutLost, nil
		}
		err = e.exec.Attempt(ctx, reg.Name, category, en, attempt, func(ctx context.Context) error {
			var err error
			infra, err = e.exec.ApplyPM(ctx, reg.Name, rt, corr, m, &en)
			return err
		})
		infra = infra && !errors.Is(err, ErrHandlerTimeout)
		g.Leave(err == nil)
		if err == nil {
			return executor.OutDone, nil
		}
		if errors.Is(err, ErrFenced) {
			p.held.Lost(err)
			return executor.OutLost, nil
		}
		if p.held.Context().Err() != nil {
			return executor.OutLost, nil
		}
		if errors.Is(err, ErrPermanent) {
			return halt("pm failed permanently", err)
		}
		// An infrastructure error (the state store) is retried without
		// counting, unless it cannot pass by itself (rdb.Permanent:
		// WRONGTYPE on the state key, an ACL refusal), which counts like a
		// pm failure and so ends in a reported halt.
		if !infra || p.isHalted() || rdb.Permanent(err) {
			failures++
			if failures > policy.MaxRetries {
				return halt(fmt.Sprintf("pm failed %d times", failures), err)
			}
		}
		e.telemetry.Event(ctx, reg.Name, category, telemetry.OutcomeRetried)
		e.log.Warn("seqby: pm failed; retrying", "handler", reg.Name, "correlation", corr, "stream", en.Stream,
			"entry", en.ID, "failures", failures, "backoff", backoff, "err", err)
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-p.held.Context().Done():
			t.Stop()
			return executor.OutLost, nil
		case <-p.release:
			t.Stop()
			return executor.OutStop, nil
		}
		backoff = min(2*backoff, policy.MaxBackoff)
	}
}

// balancePM is one discovery cycle for a sequential pm: its correlation
// values are the union of its categories' indexes (a value appears as soon
// as any category has a stream for it). Like balance for a keyed handler,
// it moves this instance's share toward ceil(values / live members).
func (e *Engine) balancePM(base context.Context, stop <-chan struct{}, name string, cs []consumer, wg *sync.WaitGroup) {
	reg := cs[0].reg
	cats := categories(reg)
	list := func(ctx context.Context) ([]unit, error) {
		seen := map[string]bool{}
		var units []unit
		for _, cat := range cats {
			keys, err := e.partitions(ctx, cat)
			if err != nil {
				return nil, fmt.Errorf("reading the partition index of %s: %w", cat, err)
			}
			e.warnSize(cat, len(keys))
			for _, k := range keys {
				if seen[k] || checkKeySuffix(cat, "", k, e.o.BackfillSuffix) != nil {
					continue
				}
				seen[k] = true
				var lanes []string
				for _, c := range cats {
					lanes = append(lanes, rdb.PartitionStream(c, k))
				}
				for _, c := range cats {
					lanes = append(lanes, rdb.BackfillStream(c, k, e.o.BackfillSuffix))
				}
				units = append(units, unit{id: pmPartitionID(name, k), ref: rdb.PMLease(name, k, lanes[:len(cats)]), key: k, cats: cats, lanes: lanes})
			}
		}
		return units, nil
	}
	e.cycle(base, stop, name, wg, list, func(u unit, l rdb.Lease, sent time.Time) *partition {
		return e.newPMPartition(base, reg, cats, u.key, l, sent)
	}, (*partition).runPM)
}
