package seqbytest

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/seqby/seqby/runtime"
	"github.com/seqby/seqby/runtime/internal/rdb"
)

// Options shape StartEngine.
type Options struct {
	// RedisURL is the server to run on; "" means $SEQBYTEST_REDIS_URL,
	// and when that is unset too, an embedded Redis started for the test.
	RedisURL string
	// Engine configures the engine. Zero timing fields take short test
	// values instead of the engine's defaults: LeaseTTL 1s,
	// HeartbeatInterval 200ms, DiscoveryInterval 50ms, BlockTimeout
	// 200ms, RetryBackoff 5ms, MaxBackoff 50ms. A nil Logger writes the
	// engine's warnings and errors to the test's output, each line
	// naming the test's line that called StartEngine (the engine logs
	// from its own goroutines). On the embedded Redis, SkipEvictionCheck
	// is set: it has no CONFIG command, so no maxmemory-policy to check.
	Engine runtime.Options
	// Timeout bounds WaitDrained and Eventually. Default 10s.
	Timeout time.Duration
}

// Engine is a running engine of a test, with a publisher on its Redis.
// It stops when the test ends (or at Stop).
type Engine struct {
	*runtime.Engine
	// Publisher writes to the engine's Redis.
	Publisher *runtime.Publisher
	// Client is the engine's Redis client.
	Client redis.UniversalClient

	t       testing.TB
	regs    []runtime.Registration
	timeout time.Duration
	stop    func()
}

// StartEngine registers regs on a new engine, runs it until the test ends,
// and returns it once it has started consuming. The test fails if the
// engine cannot start.
func StartEngine(t testing.TB, regs []runtime.Registration, opts ...Options) *Engine {
	t.Helper()
	pos := testPosition()
	var o Options
	if len(opts) > 0 {
		o = opts[0]
	}
	c, embedded := client(t, o.RedisURL)
	eo := testTimings(o.Engine)
	if eo.Logger == nil {
		eo.Logger = testLogger(t, pos)
	}
	if embedded {
		// The embedded Redis has no CONFIG: there is no maxmemory-policy
		// to check, and a warning about it would be noise in every test.
		eo.SkipEvictionCheck = true
	}
	eng, err := runtime.NewEngine(c, eo)
	if err == nil {
		err = eng.Register(regs...)
	}
	if err != nil {
		t.Fatalf("seqbytest: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- eng.Run(ctx) }()
	e := &Engine{Engine: eng, Publisher: runtime.NewPublisher(c, runtime.PublisherOptions{Codec: eo.Codec}), Client: c,
		t: t, regs: regs, timeout: o.Timeout}
	if e.timeout <= 0 {
		e.timeout = 10 * time.Second
	}
	var once sync.Once
	e.stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("seqbytest: engine: %v", err)
				}
			case <-time.After(30 * time.Second):
				t.Errorf("seqbytest: the engine did not stop within 30s (a handler that ignores its context?)")
			}
		})
	}
	t.Cleanup(e.stop)
	e.Eventually("the engine to start", func() bool {
		select {
		case err := <-done:
			done <- err
			t.Fatalf("seqbytest: engine: Run returned %v", err)
		default:
		}
		return eng.Status().Consuming
	})
	return e
}

// client connects to url, $SEQBYTEST_REDIS_URL, or an embedded Redis
// (then embedded is true).
func client(t testing.TB, url string) (c redis.UniversalClient, embedded bool) {
	t.Helper()
	if url == "" {
		url = os.Getenv("SEQBYTEST_REDIS_URL")
	}
	if url == "" {
		m := miniredis.RunT(t)
		c := redis.NewClient(&redis.Options{Addr: m.Addr(), ContextTimeoutEnabled: true})
		t.Cleanup(func() { c.Close() })
		return c, true
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := runtime.Connect(ctx, url)
	if err != nil {
		t.Fatalf("seqbytest: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c, false
}

// testTimings fills o's zero timings with short test values, and a nil
// Codec with JSON.
func testTimings(o runtime.Options) runtime.Options {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&o.LeaseTTL, time.Second)
	def(&o.HeartbeatInterval, o.LeaseTTL/5)
	def(&o.DiscoveryInterval, 50*time.Millisecond)
	def(&o.BlockTimeout, 200*time.Millisecond)
	def(&o.Retry.RetryBackoff, 5*time.Millisecond)
	def(&o.Retry.MaxBackoff, 50*time.Millisecond)
	if o.Codec == nil {
		o.Codec = runtime.JSON
	}
	return o
}

// Publish publishes msgs in order; the test fails on an error.
func (e *Engine) Publish(msgs ...runtime.Message) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), e.timeout)
	defer cancel()
	for _, m := range msgs {
		if err := e.Publisher.Publish(ctx, m); err != nil {
			e.t.Fatalf("seqbytest: publish: %v", err)
		}
	}
}

// Eventually polls cond until it holds; the test fails, naming what, if
// it does not within the timeout.
func (e *Engine) Eventually(what string, cond func() bool) {
	e.t.Helper()
	deadline := time.Now().Add(e.timeout)
	for !cond() {
		if time.Now().After(deadline) {
			e.t.Fatalf("seqbytest: timed out after %v waiting for %s", e.timeout, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// WaitDrained waits until every registered handler has handled every
// entry of its categories: nothing pending, nothing undelivered. The test
// fails, listing what is left, if that does not happen within the
// timeout, and at once, with the halt, if a partition halts meanwhile.
func (e *Engine) WaitDrained() {
	e.t.Helper()
	deadline := time.Now().Add(e.timeout)
	for {
		if hs := e.Status().Halted(); len(hs) > 0 {
			h := hs[0].Halt
			e.t.Fatalf("seqbytest: partition %s of %s halted on %s (%s): %v", h.Key, h.Handler, h.EntryID, h.Reason, h.Err)
		}
		left, err := e.left()
		if err == nil && len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			if err != nil {
				e.t.Fatalf("seqbytest: waiting for the handlers to drain: %v", err)
			}
			e.t.Fatalf("seqbytest: not drained after %v: %s", e.timeout, strings.Join(left, "; "))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// left lists the streams whose groups still have entries to handle.
func (e *Engine) left() ([]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var out []string
	for _, reg := range e.regs {
		for _, s := range streamsOf(ctx, e.Client, reg) {
			n, ok, err := rdb.Backlog(ctx, e.Client, reg.Name, []string{s})
			if err != nil {
				return nil, err
			}
			if !ok[0] || n[0] > 0 {
				out = append(out, fmt.Sprintf("%s: %d entries left for %s", s, n[0], reg.Name))
			}
		}
	}
	return out, nil
}

// streamsOf is every stream reg reads: a partitioned category's partition
// streams (from its index) and backfill lanes, or the category's stream.
func streamsOf(ctx context.Context, c redis.UniversalClient, reg runtime.Registration) []string {
	var out []string
	seen := map[string]bool{}
	for _, rt := range reg.Routes {
		if seen[rt.Category] {
			continue
		}
		seen[rt.Category] = true
		keys, err := rdb.Partitions(ctx, c, rt.Category)
		if err != nil || len(keys) == 0 {
			out = append(out, rt.Category)
			continue
		}
		for _, k := range keys {
			out = append(out, rdb.PartitionStream(rt.Category, k), rdb.BackfillStream(rt.Category, k, runtime.DefaultBackfillSuffix))
		}
	}
	return out
}

// Stop stops the engine gracefully and waits for it (the test's cleanup
// does it too).
func (e *Engine) Stop() { e.stop() }
