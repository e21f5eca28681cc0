package runtime

import (
	"context"
	"sync"
	"time"
)

// An idle partition keeps no goroutine: thousands of partitions with
// nothing to do cost their state, not a stack each. sleep arms what ends
// the idleness (a wake-up signal for the key, a release asked for, the
// end of the lease's context, the safety-net re-read) as callbacks; the
// first to fire starts resume on a new goroutine, which disarms the others
// first. The worker goroutine that called sleep returns right after it.

// sleep leaves the partition idle until a signal for its key in one of
// cats counted after the matching mark, a release, the end of p.held.Context(), or d
// passes.
func (p *partition) sleep(d time.Duration, cats []string, marks []uint64) {
	p.sleepUntil(d, cats, marks, nil)
}

// sleepUntil is sleep that also ends when until does (nil: never), and
// with no timer when d is not positive.
func (p *partition) sleepUntil(d time.Duration, cats []string, marks []uint64, until context.Context) {
	e := p.e
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
				p.relMu.Lock()
				p.onRelease = nil
				p.relMu.Unlock()
				p.resume()
			}()
		})
	}
	armed.Lock()
	defer armed.Unlock()
	if d > 0 {
		timer = time.AfterFunc(d, wake)
	}
	stop = context.AfterFunc(p.held.Context(), wake)
	if until != nil {
		stop2 = context.AfterFunc(until, wake)
	}
	for i, c := range cats {
		cancel = append(cancel, e.wake.Notify(c, p.key, marks[i], wake))
	}
	p.relMu.Lock()
	if p.releasing() {
		p.relMu.Unlock()
		wake()
		return
	}
	p.onRelease = wake
	p.relMu.Unlock()
}
