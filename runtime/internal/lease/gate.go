package lease

import (
	"context"
	"errors"
	"time"

	"github.com/seqby/seqby/runtime/internal/executor"
	"github.com/seqby/seqby/runtime/internal/rdb"
	"github.com/seqby/seqby/runtime/internal/sleep"
)

// The fence rule, the one every path that runs a handler goes through.
// An attempt of a keyed handler or of a sequential pm, whether a first
// attempt, a retry after its backoff, a halted head's slow retry from
// memory or the first attempt after a handover, starts only
//
//  1. before the lease's local deadline (the last renew sent + LeaseTTL -
//     LeaseMargin, on this process's monotonic clock), and
//  2. after a call that confirmed the lease in Redis was *sent* at most
//     Options.VerifyBound (25ms) earlier: the fenced read or ack that
//     returned the entry, or else a confirmation sent for this attempt.
//  3. in the strict replication mode (Options.ReplicaAcks), after every
//     write made for the partition before the attempt began is on that
//     many replicas of the same primary (package replicas); and the
//     attempt's entry is acked only once what it committed is too
//     (the worker's settle).
//
// Counting from when the call was sent, not from when its reply came or
// the entry was decoded, keeps every slow step in between (a slow reply,
// decoding, removing a halt record) inside the bound; an entry held in
// memory (a halted head between its retries) has no such call, so its
// attempt always confirms first. A confirmation is sent without holding a
// concurrency slot, in the Batcher's next round, and the slot is taken
// after its reply; if that wait outlasted the bound, the next confirmation
// is sent holding the slot. That one is the newest there can be: if its
// own round trip outlasts the bound (a distant Redis), the attempt starts
// right after its reply rather than never, provided the reply came within
// the engine's admitted confirmation age, which Pause waits out; one
// answered later raises that age, stores it in Redis and confirms again
// (raiseAdmitAge), and one later than any admitted age may be (LeaseTTL/2)
// starts nothing: the gate backs off without the slot and confirms
// again. The engine warns to raise VerifyBound.
//
// An attempt of a head that has a halt record (the partition halted on
// it, or a predecessor's record names it) confirms with begin_attempt.lua,
// which also marks the attempt in Redis next to the lease. An operator's
// skip or DLQ move refuses while the mark holds the lease's token
// (inspect.ErrRetrying), and a resolve that went through deleted the lease, so no
// attempt of that head starts anywhere after it. The mark is renewed with
// the lease while the attempt runs, removed right after a failed attempt,
// and after a successful one once the head is acked (until then the head
// is still pending and an operator must not skip what was applied).
//
// Only a body already running when the lease is lost can finish late (its
// context is cancelled then, and its commits are fenced if it uses
// LeaseFromContext).

// DefaultVerifyBound is Options.VerifyBound's default (rule 2 above).
const DefaultVerifyBound = 25 * time.Millisecond

// slowConfirmEvery spaces the warnings of confirmations slower than the
// bound.
const slowConfirmEvery = time.Minute

// Gate admits the attempts of one entry of a leased partition (an
// executor.Gate): a concurrency slot, a live context, and the fence rule.
// A handler without a lease takes only a slot (executor.Slots).
type Gate struct {
	ls *Leases
	h  *Held
	// confirmed is when the last call that confirmed the lease was sent
	// (zero: none).
	confirmed time.Time
	// head: the entry is a head with a halt record; its attempts begin
	// with begin_attempt and are marked.
	head bool
	// stopped: enter refused before any attempt started because the
	// strict mode's wait for replicas failed (gave up, met a new primary,
	// or the lease ended meanwhile); the entry is handed back (OutStop),
	// its delivery with it.
	stopped bool
	// paused: enter refused because an operator paused the partition or
	// its handler; no attempt started (OutPause). hp is the handler's
	// pause that did, nil for the partition's own.
	paused bool
	hp     *HandlerPause
}

// Gate is the gate of an entry of h returned by a fenced call sent at
// confirmed (zero: it comes from memory); head: the entry is a head with
// a halt record (the head the worker halted on, or the one a
// predecessor's record names).
func (h *Held) Gate(confirmed time.Time, head bool) *Gate {
	return &Gate{ls: h.ls, h: h, confirmed: confirmed, head: head}
}

// Pause is the handler's pause that refused the attempt (OutPause), nil
// when it was the partition's own.
func (g *Gate) Pause() *HandlerPause { return g.hp }

// Enter admits an attempt (executor.Gate): enter's answer, and why it
// refused.
func (g *Gate) Enter(ctx context.Context) executor.Admission {
	switch {
	case g.enter(ctx):
		return executor.Admitted
	case g.paused:
		return executor.Paused
	case g.stopped:
		return executor.Stopped
	}
	return executor.Refused
}

// enter waits for a concurrency slot and reports whether the attempt may
// start; then the caller holds the slot and must call Leave. False: ctx
// ended or the lease is lost, and nothing is held. A Redis error while
// confirming is retried after a backoff spent without the slot, while ctx
// lasts (a confirmation that was sent holding a slot is sent holding one
// again): the attempt waits rather than starts unconfirmed.
//
// A confirmation the fence rule needs is sent without the slot, in the
// Batcher's rounds: holding a slot through a round trip would make the
// other partitions wait longer for theirs, and past the bound they would
// need a confirmation of their own (the verify lock-in: one more script
// call per event once more partitions have work than Concurrency). Only
// when the wait for a slot after a fresh confirmation outlasted the bound
// (handlers slower than the bound, more partitions with work than slots)
// is the next confirmation sent holding the slot, so the attempt cannot
// chase a confirmation that every slot wait makes stale again. That one
// is used if it is within the bound, or within the admitted age stored
// before it was sent; one answered later raises the age and is sent
// again, still holding the slot (raiseAdmitAge). One answered later than
// any admitted age may be, or whose raise failed, starts nothing: the
// gate backs off as after a Redis error, without the slot.
func (g *Gate) enter(ctx context.Context) bool {
	backoff := g.ls.cfg.RetryBackoff
	bound := g.ls.cfg.VerifyBound
	// begun: a confirmation was sent for this attempt (a head's
	// begin_attempt marks it). holdToConfirm: the next confirmation is
	// sent holding the slot. An attempt that needs a confirmation before
	// it even waits for a slot (an entry from memory, a head, a retry
	// after its backoff) sends it first.
	begun, holdToConfirm := false, false
	if hp := g.ls.cfg.Paused(g.h.id.Handler); hp != nil {
		g.paused, g.hp = true, hp
		return g.refuse()
	}
	if g.ls.cfg.Replicas != nil {
		if g.head {
			// The attempt mark is a write an operator's skip relies on:
			// made before the barrier, so the barrier covers it.
			if err := g.h.confirm(ctx, true); errors.Is(err, rdb.ErrPaused) {
				g.paused = true
				return g.refuse()
			} else if errors.Is(err, rdb.ErrFenced) || ctx.Err() != nil {
				return g.refuse()
			} else if err == nil {
				begun = true
			}
		}
		if err := g.h.await(ctx); err != nil {
			// No attempt started: a partition let go (a new primary, a
			// lease whose renewals replicas did not confirm in time) or
			// handed over gives the entry back with its delivery
			// (OutStop).
			g.stopped = true
			return g.refuse()
		}
	}
	needs := func() bool { return (g.head && !begun) || time.Since(g.confirmed) > bound }
	held := false // a slot is held
	// late: the last confirmation succeeded but started no attempt for
	// its age (warned of apart, at most every lateConfirmEvery).
	late := false
	for {
		if !held && (!needs() || holdToConfirm) {
			if !g.ls.cfg.Slots.Acquire(ctx) {
				return g.refuse()
			}
			held = true
			if !time.Now().Before(g.h.deadline()) {
				g.release()
				g.h.Lost(errors.New("lease not renewed before its deadline"))
				return g.refuse()
			}
			if !needs() {
				return g.admit()
			}
			if !holdToConfirm {
				// The confirmation went stale during the wait: confirm
				// without the slot, then wait for one again.
				g.release()
				held = false
			}
		}
		// The admitted age a confirmation sent holding the slot is judged
		// by is the one stored before it was sent (raiseAdmitAge).
		var limit admitLimit
		if held {
			limit = g.ls.admitAge(g.h.id.Handler).limit()
		}
		sent := time.Now()
		err := g.h.confirm(ctx, g.head && !begun)
		if err == nil {
			g.h.unpaused()
			g.confirmed, begun = sent, true
			if held && g.ls.heldConfirmHook != nil {
				g.ls.heldConfirmHook(g.h)
			}
			if rtt := time.Since(sent); rtt > bound {
				g.ls.warnSlowConfirm(rtt)
			}
			if !held {
				// Wait for the slot now; if that wait outlasts the bound,
				// confirm holding the next one.
				holdToConfirm = true
				continue
			}
			if !time.Now().Before(g.h.deadline()) {
				g.release()
				g.h.Lost(errors.New("lease not renewed before its deadline"))
				return g.refuse()
			}
			age := time.Since(sent)
			if limit.admits(age, bound, time.Now()) {
				return g.admit()
			}
			// Answered later than the admitted age: raise it, and once
			// Redis has stored it, confirm again, keeping the slot. Later
			// than any age may be, or the raise failed: no attempt starts
			// on it; back off without the slot (holding it would starve
			// the other partitions) and confirm again.
			if age > g.ls.admitAgeCap() {
				g.ls.warnLateConfirm(g.h.id.Handler, age, nil)
				late = true
			} else if rerr := g.ls.raiseAdmitAge(ctx, g.h.id.Handler, age); rerr == nil {
				continue
			} else if ctx.Err() == nil {
				g.ls.warnLateConfirm(g.h.id.Handler, age, rerr)
				late = true
			}
		}
		if held {
			g.release()
			held = false
		}
		if errors.Is(err, rdb.ErrPaused) {
			g.paused = true
			return g.refuse()
		}
		if errors.Is(err, rdb.ErrFenced) || ctx.Err() != nil {
			return g.refuse()
		}
		if !late {
			g.ls.cfg.Log.Warn("seqby: cannot verify the lease before a handler attempt; waiting", "handler", g.h.id.Handler, "stream", g.h.id.Stream, "err", err, "backoff", backoff)
		}
		late = false
		if !sleep.For(ctx, backoff) {
			return g.refuse()
		}
		backoff = min(2*backoff, g.ls.cfg.MaxBackoff)
	}
}

// admit ends enter holding the slot: true, unless a discovery cycle
// found the handler paused while the attempt waited for its slot or its
// confirmation (the handler's pause is not in the scripts, so this is its
// last check), which frees the slot and refuses it.
func (g *Gate) admit() bool {
	if hp := g.ls.cfg.Paused(g.h.id.Handler); hp != nil {
		g.release()
		g.paused, g.hp = true, hp
		return g.refuse()
	}
	return true
}

// refuse ends an attempt enter does not admit: a head's attempt mark, if
// a begin_attempt set it (one whose reply was lost may have), is removed,
// since no attempt runs; and false.
func (g *Gate) refuse() bool {
	if g.head {
		g.h.EndAttempt() // a no-op when nothing is marked
	}
	return false
}

// Leave ends an attempt enter admitted (executor.Gate): it frees the slot
// and, after a failed attempt of a marked head, removes the mark (a
// successful one keeps it until the worker acks the head).
func (g *Gate) Leave(ok bool) {
	g.release()
	if g.head && !ok {
		g.h.EndAttempt()
	}
}

// release frees the concurrency slot.
func (g *Gate) release() { g.ls.cfg.Slots.Release() }

// warnSlowConfirm reports, at most once per slowConfirmEvery, a lease
// confirmation whose round trip outlasted Options.VerifyBound.
func (ls *Leases) warnSlowConfirm(rtt time.Duration) {
	now := time.Now().UnixNano()
	last := ls.slowConfirmAt.Load()
	if now-last < int64(slowConfirmEvery) || !ls.slowConfirmAt.CompareAndSwap(last, now) {
		return
	}
	ls.cfg.Log.Warn("seqby: confirming a lease before a handler attempt took longer than Options.VerifyBound; attempts start right after the confirmation (within the admitted confirmation age, which an operator's Pause waits out), but raise VerifyBound above Redis's round trip",
		"round_trip", rtt.Round(time.Millisecond), "verify_bound", ls.cfg.VerifyBound)
}

// Paused returns handler's pause, nil when it is not paused. It
// starts the unread pause when a read has failed and the last successful
// one was sent more than pauseReadLimit ago: checked here, at every
// attempt's gate, rather than only when a cycle's read fails, so that
// once a read has failed, a later cycle held up (its read waiting out a
// timeout, other handlers' cycles running long) does not hold it off.
func (ps *Pauses) Paused(handler string) *HandlerPause {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if hp := ps.m[handler]; hp != nil {
		return hp
	}
	r := ps.reads[handler]
	if r == nil || !r.failed || time.Since(r.ok) <= ps.pauseReadLimit() {
		return nil
	}
	since := "never read"
	if !r.ok.IsZero() {
		since = time.Since(r.ok).Round(time.Millisecond).String()
	}
	ps.cfg.Log.Warn("seqby: cannot read the handler's pause (an operator's seqbyctl pause -all); treating the handler as paused, no attempt starts until a read succeeds",
		"handler", handler, "last_read", since, "limit", ps.pauseReadLimit())
	return ps.start(handler, true)
}
