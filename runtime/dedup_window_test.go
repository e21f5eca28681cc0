package runtime

import (
	"context"
	"github.com/seqby/seqby/runtime/internal/rdb"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// scriptArgs records the arguments of every script call (EVALSHA, EVAL).
type scriptArgs struct {
	mu    sync.Mutex
	calls [][]any
}

func (h *scriptArgs) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *scriptArgs) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.note(cmd)
		return next(ctx, cmd)
	}
}
func (h *scriptArgs) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			h.note(cmd)
		}
		return next(ctx, cmds)
	}
}
func (h *scriptArgs) note(cmd redis.Cmder) {
	if name := strings.ToLower(cmd.Name()); name == "evalsha" || name == "eval" {
		h.mu.Lock()
		h.calls = append(h.calls, cmd.Args())
		h.mu.Unlock()
	}
}

// windows returns ARGV[1] of every append_once call (keys: the lane and a
// __msgid__ key).
// naming counts the calls that had arg among their arguments.
func (h *scriptArgs) naming(arg any) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, args := range h.calls {
		if slices.Contains(args, arg) {
			n++
		}
	}
	return n
}

func (h *scriptArgs) windows() []any {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []any
	for _, a := range h.calls {
		// evalsha sha numkeys key1 key2 argv1 ...
		if len(a) > 5 && strings.Contains(a[4].(string), "__msgid__:") {
			out = append(out, a[5])
		}
	}
	return out
}

// A DedupWindow under a millisecond counts as one millisecond: it used to
// become PX 0, so append_once stored the entry and then failed on the SET,
// and Publish returned ErrPublish with the entry stored (a relay's retry
// stored it again, for ever). Now every publish with a message id
// succeeds, stores one entry, and remembers the id for 1 ms (not
// measured: the dedup key may expire before a test can look).
func TestPublishSubMillisecondDedupWindow(t *testing.T) {
	for _, window := range []time.Duration{time.Nanosecond, 500 * time.Microsecond} {
		t.Run(window.String(), func(t *testing.T) {
			c, ctx := newRedis(t), ctxT(t)
			// Cached, as an engine's start caches it: a publish that met
			// NOSCRIPT would load it and count one call more.
			if err := rdb.LoadScripts(ctx, c); err != nil {
				t.Fatal(err)
			}
			h := &scriptArgs{}
			c.AddHook(h)
			o := PublisherOptions{DedupWindow: window}
			if got := o.withDefaults().DedupWindow; got != time.Millisecond {
				t.Errorf("DedupWindow %v became %v, want 1ms", window, got)
			}
			p := NewPublisher(c, o)
			if err := p.Publish(ctx, ev("a", 1), WithMessageID("m-1")); err != nil {
				t.Fatalf("Publish: %v (entries stored: %d)", err, c.XLen(ctx, "order:{a}").Val())
			}
			if n := c.XLen(ctx, "order:{a}").Val(); n != 1 {
				t.Fatalf("Publish: %d entries, want 1", n)
			}
			// A retry succeeds too (whether it is deduplicated depends on
			// whether 1 ms passed; without the error nobody retries).
			if err := p.Publish(ctx, ev("a", 1), WithMessageID("m-1")); err != nil {
				t.Fatalf("Publish again: %v", err)
			}
			if err := p.Publish(ctx, &testNote{Text: "n"}, WithMessageID("m-1")); err != nil {
				t.Fatalf("Publish unpartitioned: %v", err)
			}
			if n := c.XLen(ctx, "note").Val(); n != 1 {
				t.Fatalf("Publish unpartitioned: %d entries, want 1", n)
			}
			r, err := NewRecord(ctx, ev("b", 1), nil, WithMessageID("m-2"))
			if err != nil {
				t.Fatal(err)
			}
			if err := p.PublishRecord(ctx, r); err != nil {
				t.Fatalf("PublishRecord: %v", err)
			}
			if n := c.XLen(ctx, "order:{b}").Val(); n != 1 {
				t.Fatalf("PublishRecord: %d entries, want 1", n)
			}
			ws := h.windows()
			if len(ws) != 4 {
				t.Fatalf("%d append_once calls, want 4", len(ws))
			}
			for _, w := range ws {
				if w != int64(1) {
					t.Fatalf("append_once ran with window %v ms, want 1", w)
				}
			}
		})
	}
}
