package runtime

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seqby/seqby/runtime/internal/lease"
)

// A confirmation sent holding the only concurrency slot that keeps coming
// back later than any admitted age may be (LeaseTTL/2) starts nothing,
// and the gate confirms again after a backoff spent without the slot, so
// the other partitions go on; the engine warns once per 30 s (seen
// before: it confirmed again at once, holding the slot, and b never ran
// again).
func TestConfirmationLaterThanTheCapBacksOffWithoutTheSlot(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	const work = 40 * time.Millisecond
	var starts attemptStarts
	started := starts.of
	h := starts.handler("late", work)
	var logs syncBuffer
	opts := fastOptions("l")
	opts.Concurrency = 1 // a and b take turns: a's slot waits outlast the bound
	opts.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	var armed atomic.Bool
	caught := make(chan struct{}, 1)
	startEngineWith(t, c, opts, func(e *Engine) {
		e.leases.SetHeldConfirmHook(func(h *lease.Held) {
			if h.Key() == "a" && armed.Load() {
				select {
				case caught <- struct{}{}:
				default:
				}
				time.Sleep(opts.LeaseTTL/2 + 100*time.Millisecond) // later than the cap
			}
		})
	}, h)
	p := NewPublisher(c)
	for i := 1; i <= 200; i++ {
		for _, k := range []string{"a", "b"} {
			if err := p.Publish(ctx, ev(k, i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	armed.Store(true)
	select {
	case <-caught:
	case <-ctx.Done():
		t.Fatal("no confirmation of a was sent holding the slot")
	}
	from := time.Now()
	time.Sleep(3 * time.Second)
	armed.Store(false)
	for _, at := range started("a") {
		if at.After(from) && at.Before(from.Add(3*time.Second)) {
			t.Errorf("an attempt of a started %v after its confirmations became later than the cap", at.Sub(from).Round(time.Millisecond))
		}
	}
	n := 0
	for _, at := range started("b") {
		if at.After(from) {
			n++
		}
	}
	if n < 2 {
		t.Errorf("b started %d attempts in 3s while a's confirmations came back late; want it to go on in a's backoffs", n)
	}
	if w := strings.Count(logs.String(), "later than any admitted confirmation age"); w != 1 {
		t.Errorf("warned %d times in 3s; want once", w)
	}
	eventually(t, 20*time.Second, "a to go on once its confirmations are timely", func() bool {
		s := started("a")
		return len(s) > 0 && s[len(s)-1].After(from.Add(3*time.Second))
	})
}

// attemptStarts records when each key's handler attempts started, on this
// process's monotonic clock.
type attemptStarts struct {
	mu sync.Mutex
	m  map[string][]time.Time
}

// handler is a keyed handler named name that notes each attempt's start,
// then works for work.
func (s *attemptStarts) handler(name string, work time.Duration) Registration {
	return keyedHandler(name, func(_ context.Context, e *testEvent) error {
		s.mu.Lock()
		if s.m == nil {
			s.m = map[string][]time.Time{}
		}
		s.m[e.Client] = append(s.m[e.Client], time.Now())
		s.mu.Unlock()
		time.Sleep(work)
		return nil
	})
}

// of is when client's attempts started.
func (s *attemptStarts) of(client string) []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.m[client])
}
