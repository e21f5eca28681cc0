package runtime

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/seqby/seqby/runtime/internal/rdb"
)

// An operator pauses one key of a handler (inspect.Inspector.Pause, seqbyctl
// pause) or the whole handler (PauseHandler, seqbyctl pause -all).
//
// A key's pause is a mark in the partition's slot (rdb.PauseKey). Every
// call an attempt can start under (the fenced read that returns the
// entry, the ack that confirms the lease for the next entry read ahead, a
// verification, a halted head's begin_attempt) checks it after its acks
// and refuses (rdb.ErrPaused): the event in flight finishes and is acked,
// and no later one starts. The owner keeps its lease (renewals go on) and
// the entries it read ahead, and sleeps, as an idle partition does, until a wake-up
// signal for the key, which Resume sends after deleting the mark, so a
// paused partition costs what an idle one does and resumes within one wake-up. The
// mark outlives owners: a new owner's first read finds it.
//
// A handler's pause is a key read by each discovery cycle: from the next
// cycle on no attempt of the handler starts (its partitions sleep until
// a later cycle finds the pause gone). The handler's pause is not in the
// scripts, so an engine that cannot read it would not learn of one: it
// fails closed. Once a read has failed and the last one that succeeded
// was sent more than two discovery intervals ago (pauseReadLimit), the
// handler counts as paused here (an unread pause) until a read succeeds.
// Two intervals, not one: a cycle runs late now and then (the cycles of
// every handler run one after the other), and a read that failed once
// must not stop a handler that the next cycle reads fine.

// handlerPause is a whole handler's pause as this engine last read it.
type handlerPause struct {
	ctx    context.Context // ends when a discovery cycle finds the pause gone
	cancel context.CancelFunc
	// unread: not an operator's pause (as far as this engine knows): its
	// reads of the pause failed for longer than pauseReadLimit, so no
	// attempt starts until one succeeds. Guarded by pauses.mu.
	unread bool
}

// pauses are the handlers found paused by the last discovery cycles.
type pauses struct {
	mu sync.Mutex
	m  map[string]*handlerPause
	// reads are each handler's reads of its pause.
	reads map[string]*pauseRead
}

// pauseRead is how a handler's reads of its pause went.
type pauseRead struct {
	ok     time.Time // when the last read that succeeded was sent (zero: none yet)
	failed bool      // a read failed since then
}

// pauseReadLimit is how old the last successful read of a handler's pause
// may be, once a read has failed, before the handler counts as paused.
func (e *Engine) pauseReadLimit() time.Duration { return 2 * e.o.DiscoveryInterval }

// readHandlerPause reads whether handler is paused and starts or ends its
// pause here; a failed read counts toward the unread pause.
func (e *Engine) readHandlerPause(ctx context.Context, handler string) {
	sent := time.Now()
	n, err := e.c.Exists(ctx, rdb.HandlerPauseKey(handler)).Result()
	if err != nil {
		e.log.Debug("seqby: reading the handler's pause failed", "handler", handler, "err", err)
		e.pauses.mu.Lock()
		r := e.pauses.read(handler)
		r.failed = true
		e.pauses.mu.Unlock()
		// Fail closed now if the last success is that old already.
		e.handlerPaused(handler)
		return
	}
	e.setHandlerPaused(handler, n == 1, sent)
}

// read is handler's pauseRead, made on first use; mu held.
func (ps *pauses) read(handler string) *pauseRead {
	r := ps.reads[handler]
	if r == nil {
		if ps.reads == nil {
			ps.reads = map[string]*pauseRead{}
		}
		r = &pauseRead{}
		ps.reads[handler] = r
	}
	return r
}

// setHandlerPaused starts or ends handler's pause here, as a read sent at
// sent found it; an unread pause ends (or becomes the operator's).
func (e *Engine) setHandlerPaused(handler string, paused bool, sent time.Time) {
	e.pauses.mu.Lock()
	defer e.pauses.mu.Unlock()
	r := e.pauses.read(handler)
	r.ok, r.failed = later(r.ok, sent), false
	hp := e.pauses.m[handler]
	if hp != nil && hp.unread {
		if paused {
			hp.unread = false // the same sleepers go on sleeping, for the operator now
			e.log.Info("seqby: read the handler's pause again; it is paused by an operator, no attempt starts until it is resumed (seqbyctl resume -all)", "handler", handler)
			return
		}
		hp.cancel()
		delete(e.pauses.m, handler)
		e.log.Info("seqby: read the handler's pause again; it is not paused, attempts start again", "handler", handler)
		return
	}
	switch {
	case paused && hp == nil:
		e.pauses.start(handler, false)
		e.log.Info("seqby: handler paused by an operator; no attempt starts until it is resumed (seqbyctl resume -all)", "handler", handler)
	case !paused && hp != nil:
		hp.cancel()
		delete(e.pauses.m, handler)
		e.log.Info("seqby: handler resumed", "handler", handler)
	}
}

// start makes handler's pause here; mu held.
func (ps *pauses) start(handler string, unread bool) *handlerPause {
	if ps.m == nil {
		ps.m = map[string]*handlerPause{}
	}
	ctx, cancel := context.WithCancel(context.Background())
	hp := &handlerPause{ctx: ctx, cancel: cancel, unread: unread}
	ps.m[handler] = hp
	return hp
}

// handlerPaused returns handler's pause, nil when it is not paused. It
// starts the unread pause when a read has failed and the last successful
// one was sent more than pauseReadLimit ago: checked here, at every
// attempt's gate, rather than only when a cycle's read fails, so that
// once a read has failed, a later cycle held up (its read waiting out a
// timeout, other handlers' cycles running long) does not hold it off.
func (e *Engine) handlerPaused(handler string) *handlerPause {
	e.pauses.mu.Lock()
	defer e.pauses.mu.Unlock()
	if hp := e.pauses.m[handler]; hp != nil {
		return hp
	}
	r := e.pauses.reads[handler]
	if r == nil || !r.failed || time.Since(r.ok) <= e.pauseReadLimit() {
		return nil
	}
	since := "never read"
	if !r.ok.IsZero() {
		since = time.Since(r.ok).Round(time.Millisecond).String()
	}
	e.log.Warn("seqby: cannot read the handler's pause (an operator's seqbyctl pause -all); treating the handler as paused, no attempt starts until a read succeeds",
		"handler", handler, "last_read", since, "limit", e.pauseReadLimit())
	return e.pauses.start(handler, true)
}

// endPauses ends every handler pause as Run returns, so nothing waits on
// one.
func (e *Engine) endPauses() {
	e.pauses.mu.Lock()
	defer e.pauses.mu.Unlock()
	for h, hp := range e.pauses.m {
		hp.cancel()
		delete(e.pauses.m, h)
	}
}

// maxPausedReasons bounds the paused partitions Health lists one by one.
const maxPausedReasons = 10

// pausedReasons are Health's lines for what an operator paused here: the
// paused handlers, and the paused partitions this instance owns (the
// first maxPausedReasons, then a count).
func (e *Engine) pausedReasons() []string {
	var out []string
	e.pauses.mu.Lock()
	for h, hp := range e.pauses.m {
		if hp.unread {
			out = append(out, "paused: handler "+h+" (every key): this instance cannot read its pause from Redis; no attempt starts until a read succeeds")
			continue
		}
		out = append(out, "paused: handler "+h+" (every key) by an operator; seqbyctl resume -handler "+h+" -all")
	}
	e.pauses.mu.Unlock()
	slices.Sort(out)
	var keys []string
	e.mu.Lock()
	for _, p := range e.parts {
		if p.paused.Load() && e.handlerPaused(p.reg.Name) == nil {
			keys = append(keys, fmt.Sprintf("paused: partition %s of handler %s by an operator; seqbyctl resume -handler %s -stream '%s'", p.key, p.reg.Name, p.reg.Name, p.lanes[0]))
		}
	}
	e.mu.Unlock()
	slices.Sort(keys)
	if len(keys) > maxPausedReasons {
		n := len(keys) - maxPausedReasons
		keys = append(keys[:maxPausedReasons], fmt.Sprintf("paused: %d more partitions (seqbyctl paused)", n))
	}
	return append(out, keys...)
}

// pausedBy reports whether err says the partition is paused.
func pausedBy(err error) bool { return errors.Is(err, ErrPaused) }

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
func (p *partition) sleepPaused(marks []uint64, hp *handlerPause) bool {
	if len(p.unacked) > 0 {
		if err := p.ackUnacked(); err != nil && !pausedBy(err) {
			p.e.log.Debug("seqby: acking before a pause failed; the acks go with the next read", "handler", p.reg.Name, "stream", p.lanes[0], "err", err)
		}
	}
	p.pausedHandler.Store(hp != nil)
	if !p.paused.Swap(true) {
		p.e.log.Info("seqby: partition paused by an operator; the entry in flight finished, no later one starts until it is resumed",
			"handler", p.reg.Name, "partition", p.key, "stream", p.lanes[0], "handler_paused", hp != nil)
	}
	var until context.Context
	if hp != nil {
		until = hp.ctx
	}
	cats := p.cats
	if cats == nil {
		cats = []string{p.category}
	}
	p.sleepUntil(p.safetyNet(), cats, marks, until)
	return true
}

// handlerResumed notes, at the worker's loop top, that the handler's
// pause it slept through has ended.
func (p *partition) handlerResumed() {
	if p.pausedHandler.Swap(false) {
		p.unpaused()
	}
}

// unpaused notes that a confirmation found the partition running again.
func (p *partition) unpaused() {
	if p.paused.Swap(false) {
		p.e.log.Info("seqby: partition resumed", "handler", p.reg.Name, "partition", p.key, "stream", p.lanes[0])
	}
}
