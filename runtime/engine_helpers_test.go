package runtime

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seqby/seqby/runtime/internal/rdb"
)

// running is one engine instance started by a test.
type running struct {
	*Engine
	stop func()     // graceful stop; waits for Run to return
	done chan error // Run's result (taken by stop, or by tryStart)
}

// fastOptions are short timings so the suite stays quick.
func fastOptions(owner string) Options {
	return Options{
		OwnerID:           owner,
		LeaseTTL:          time.Second,
		HeartbeatInterval: 150 * time.Millisecond,
		DiscoveryInterval: 50 * time.Millisecond,
		Retry:             RetryPolicy{RetryBackoff: 5 * time.Millisecond, MaxBackoff: 20 * time.Millisecond},
		BlockTimeout:      200 * time.Millisecond,
		Logger:            slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
}

func startEngine(t *testing.T, c redis.UniversalClient, opts Options, regs ...Registration) *running {
	t.Helper()
	return startEngineWith(t, c, opts, nil, regs...)
}

// startEngineWith is startEngine that lets setup (unless nil) change the
// engine before it runs: its test hooks.
func startEngineWith(t *testing.T, c redis.UniversalClient, opts Options, setup func(*Engine), regs ...Registration) *running {
	t.Helper()
	e, err := NewEngine(c, opts)
	if err != nil {
		t.Fatal(err)
	}
	if setup != nil {
		setup(e)
	}
	if err := e.Register(regs...); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{Engine: e, done: make(chan error, 1)}
	go func() { r.done <- e.Run(ctx) }()
	var once sync.Once
	r.stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-r.done:
				if err != nil {
					t.Errorf("Run: %v", err)
				}
			case <-time.After(30 * time.Second):
				t.Errorf("engine %s did not stop", opts.OwnerID)
			}
		})
	}
	t.Cleanup(r.stop)
	return r
}

// tryStart is startEngine that waits until the engine consumes or its
// Run returns, returning Run's error in the latter case (nil while it
// runs).
func tryStart(t *testing.T, c redis.UniversalClient, opts Options, regs ...Registration) (*running, error) {
	t.Helper()
	r := startEngine(t, c, opts, regs...)
	var runErr error
	returned := false
	eventually(t, 20*time.Second, "Run to consume or return", func() bool {
		select {
		case runErr = <-r.done:
			returned = true
			return true
		default:
			return r.Status().Consuming
		}
	})
	if returned {
		r.done <- nil // the error is the caller's; stop has nothing to report
	}
	return r, runErr
}

// journal records what handlers applied, and catches two different events
// of one key in handlers at once.
type journal struct {
	mu      sync.Mutex
	applied map[string][]int          // key -> seqs in apply order
	inside  map[string]map[string]int // key -> event -> handlers inside
	overlap []string
}

func newJournal() *journal {
	return &journal{applied: map[string][]int{}, inside: map[string]map[string]int{}}
}

func (j *journal) enter(key, event string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.inside[key] == nil {
		j.inside[key] = map[string]int{}
	}
	for other, n := range j.inside[key] {
		if n > 0 && other != event {
			j.overlap = append(j.overlap, key+": "+other+" with "+event)
		}
	}
	j.inside[key][event]++
}

func (j *journal) leave(key, event string, seq int, applied bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.inside[key][event]--
	if applied {
		j.applied[key] = append(j.applied[key], seq)
	}
}

func (j *journal) count(key string) int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return len(j.applied[key])
}

func (j *journal) seqs(key string) []int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return append([]int(nil), j.applied[key]...)
}

// inOrder reports whether seqs is 1..n, allowing an immediate re-run of
// one event (at-least-once across a handover) but no reordering or gaps.
func inOrder(seqs []int, n int) bool {
	next := 1
	for _, s := range seqs {
		switch {
		case s == next:
			next++
		case s == next-1: // re-run of the last applied event
		default:
			return false
		}
	}
	return next == n+1
}

// laneGroup names handler's consumer group on stream, whichever it is now
// (rdb.LaneGroup): a lease generation's, a parked one, or the shared one.
func laneGroup(t *testing.T, c redis.UniversalClient, stream, handler string) string {
	t.Helper()
	g, err := rdb.LaneGroup(context.Background(), c, stream, handler)
	if err != nil {
		t.Fatal(err)
	}
	return g
}
