package runtime

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

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
// a later cycle finds the pause gone).

// ErrPaused is what a confirmation returns for a partition an operator
// paused: no attempt may start under it.
var ErrPaused = rdb.ErrPaused

// handlerPause is a whole handler's pause as this engine last read it.
type handlerPause struct {
	ctx    context.Context // ends when a discovery cycle finds the pause gone
	cancel context.CancelFunc
}

// pauses are the handlers found paused by the last discovery cycles.
type pauses struct {
	mu sync.Mutex
	m  map[string]*handlerPause
}

// readHandlerPause reads whether handler is paused (a failed read keeps
// what the last one found) and starts or ends its pause here.
func (e *Engine) readHandlerPause(ctx context.Context, handler string) {
	n, err := e.c.Exists(ctx, rdb.HandlerPauseKey(handler)).Result()
	if err != nil {
		e.log.Debug("seqby: reading the handler's pause failed; keeping the last state", "handler", handler, "err", err)
		return
	}
	e.setHandlerPaused(handler, n == 1)
}

// setHandlerPaused starts or ends handler's pause here.
func (e *Engine) setHandlerPaused(handler string, paused bool) {
	e.pauses.mu.Lock()
	defer e.pauses.mu.Unlock()
	hp := e.pauses.m[handler]
	switch {
	case paused && hp == nil:
		if e.pauses.m == nil {
			e.pauses.m = map[string]*handlerPause{}
		}
		ctx, cancel := context.WithCancel(context.Background())
		e.pauses.m[handler] = &handlerPause{ctx: ctx, cancel: cancel}
		e.log.Info("seqby: handler paused by an operator; no attempt starts until it is resumed (seqbyctl resume -all)", "handler", handler)
	case !paused && hp != nil:
		hp.cancel()
		delete(e.pauses.m, handler)
		e.log.Info("seqby: handler resumed", "handler", handler)
	}
}

// handlerPaused returns handler's pause, nil when it is not paused.
func (e *Engine) handlerPaused(handler string) *handlerPause {
	e.pauses.mu.Lock()
	defer e.pauses.mu.Unlock()
	return e.pauses.m[handler]
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
	for h := range e.pauses.m {
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
