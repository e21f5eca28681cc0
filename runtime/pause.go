package runtime

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/seqby/seqby/runtime/internal/lease"
)

// maxPausedReasons bounds the paused partitions Health lists one by one.
const maxPausedReasons = 10

// pausedReasons are Health's lines for what an operator paused here: the
// paused handlers, and the paused partitions this instance owns (the
// first maxPausedReasons, then a count).
func (e *Engine) pausedReasons() []string {
	out := e.pauses.Reasons()
	var keys []string
	e.mu.Lock()
	for _, p := range e.parts {
		if p.paused.Load() && e.pauses.Paused(p.reg.Name) == nil {
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
func (p *partition) sleepPaused(marks []uint64, hp *lease.HandlerPause) bool {
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
		until = hp.Context()
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
