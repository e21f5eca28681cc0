package unkeyed

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seqby/seqby/internal/logsink"
	"github.com/seqby/seqby/internal/redistest"
	"github.com/seqby/seqby/runtime/internal/contract"
	"github.com/seqby/seqby/runtime/internal/executor"
	"github.com/seqby/seqby/runtime/internal/rdb"
)

// newRedis starts a private redis-server for the test and returns a client.
var newRedis = redistest.NewClient

// ctxT is a context for a test's Redis calls.
var ctxT = redistest.Context

// note is the message type of the tests' handler, on category "note".
type note struct {
	N int `json:"n"`
}

// noTrims is a Trimmer that never trims.
type noTrims struct{}

func (noTrims) Acked()                       {}
func (noTrims) TrimIf(context.Context, bool) {}

// halts collects the halts a Runner alerts.
type halts struct {
	mu sync.Mutex
	hs []contract.Halt
}

func (h *halts) add(x contract.Halt) { h.mu.Lock(); h.hs = append(h.hs, x); h.mu.Unlock() }

func (h *halts) len() int { h.mu.Lock(); defer h.mu.Unlock(); return len(h.hs) }

// newRunner returns a Runner of owner on c with the engine's test timings,
// whose handler "h" on "note" runs fn; its log goes to log.
func newRunner(t *testing.T, c redis.UniversalClient, owner string, fn func(n *note) error, log *logsink.Buffer, alerts *halts) *Runner {
	t.Helper()
	if err := rdb.LoadScripts(ctxT(t), c); err != nil {
		t.Fatal(err)
	}
	lg := slog.New(slog.NewTextHandler(log, nil))
	x := executor.New(executor.Config{Log: lg, Owner: owner, Concurrency: 2,
		Retry: executor.RetryPolicy{MaxRetries: 1, RetryBackoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond, HaltedRetryInterval: time.Second}})
	x.Add(executor.Handler{Name: "h", Kind: "event handler", Routes: []executor.Route{{Category: "note", Type: "note",
		Decode: func(p []byte) (any, error) {
			var n note
			return &n, json.Unmarshal(p, &n)
		},
		Invoke: func(_ context.Context, _, m any) error { return fn(m.(*note)) }}}})
	return New(Config{Client: c, Owner: owner, Exec: x, Log: lg,
		LeaseTTL: 500 * time.Millisecond, MemberTTL: 500 * time.Millisecond, HeartbeatInterval: 100 * time.Millisecond,
		DiscoveryInterval: 50 * time.Millisecond, BlockTimeout: 100 * time.Millisecond,
		RetryBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond, IdleRecheck: time.Second, BackfillSuffix: "backfill",
		Partitions: func(context.Context, string) ([]string, error) { return nil, nil },
		KeyRule:    func(_, _, _, _ string) error { return nil },
		Trims:      func(string, []string, []string) Trimmer { return noTrims{} },
		OnHalt:     alerts.add})
}

// publish adds a note entry to the "note" stream.
func publish(t *testing.T, c redis.UniversalClient, n int) string {
	t.Helper()
	p, _ := json.Marshal(note{N: n})
	id, err := c.XAdd(ctxT(t), &redis.XAddArgs{Stream: "note", Values: map[string]any{
		rdb.FieldType: "note", rdb.FieldID: "m-" + string(rune('a'+n)), rdb.FieldPayload: string(p)}}).Result()
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// eventually polls cond until it holds or d passes.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(d); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}
