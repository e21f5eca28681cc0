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

	"github.com/seqby/seqby/runtime/internal/rdb"
)

// A spike raises the admitted age to the cap; once its record has ended
// (LeaseTTL - LeaseMargin after the store, on the engine's clock), the
// next raise stores twice the confirmation's age, not the cap again, so
// Pause no longer waits the spike out (seen before: the second raise
// stored the 500ms cap again, and every Pause waited half the lease).
// While the record lasts a smaller raise lowers nothing.
func TestAdmitAgeComesDownOnceItsRecordEnded(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	opts := fastOptions("d")
	opts.LeaseTTL, opts.LeaseMargin = time.Second, 100*time.Millisecond
	e, err := NewEngine(c, opts)
	if err != nil {
		t.Fatal(err)
	}
	members := func() []string {
		t.Helper()
		ms, err := c.ZRange(ctx, rdb.AdmitAgeKey("h"), 0, -1).Result()
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(ms)
		return ms
	}
	if err := e.raiseAdmitAge(ctx, "h", 400*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if l := e.admitAge("h").limit(); l.age != 500*time.Millisecond {
		t.Fatalf("after a 400ms confirmation the admitted age is %v; want the cap, 500ms (LeaseTTL/2)", l.age)
	}
	if err := e.raiseAdmitAge(ctx, "h", 40*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if l := e.admitAge("h").limit(); l.age != 500*time.Millisecond {
		t.Fatalf("a smaller raise while the record lasts left %v; want 500ms", l.age)
	}
	until := e.admitAge("h").limit().until
	time.Sleep(time.Until(until) + 10*time.Millisecond)
	if err := e.raiseAdmitAge(ctx, "h", 40*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if l := e.admitAge("h").limit(); l.age != 80*time.Millisecond {
		t.Fatalf("a raise after the record ended left %v; want 80ms, twice the confirmation's", l.age)
	}
	inc := e.incarnation
	if got, want := members(), []string{"500|" + inc, "80|" + inc}; !slices.Equal(got, want) {
		t.Fatalf("stored %v; want %v (the 500ms member until its end in Redis)", got, want)
	}
	time.Sleep(300 * time.Millisecond) // the 500ms member has ended in Redis too
	if a, err := rdb.AdmitAge(ctx, c, "h"); err != nil || a != 80*time.Millisecond {
		t.Fatalf("Pause reads %v (%v); want 80ms", a, err)
	}
}

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
		e.heldConfirmHook = func(p *partition) {
			if p.key == "a" && armed.Load() {
				select {
				case caught <- struct{}{}:
				default:
				}
				time.Sleep(opts.LeaseTTL/2 + 100*time.Millisecond) // later than the cap
			}
		}
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
