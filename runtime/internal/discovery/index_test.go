package discovery

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seqby/seqby/runtime/internal/rdb"
)

// indexReadHook runs a function once, right after the next read of a
// category's index (SUNION) was answered and before the Index stores it:
// what happens in it happens while the read is in flight, after Redis
// answered it.
type indexReadHook struct {
	mu    sync.Mutex
	reads int
	after func()
}

func (h *indexReadHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *indexReadHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h *indexReadHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if strings.EqualFold(cmd.Name(), "sunion") {
			h.mu.Lock()
			h.reads++
			f := h.after
			h.after = nil
			h.mu.Unlock()
			if f != nil {
				f()
			}
		}
		return err
	}
}

// onNextRead sets the function run after the next index read.
func (h *indexReadHook) onNextRead(f func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.after = f
}

func (h *indexReadHook) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.reads
}

// newIndex is an Index, with the engine tests' refresh time (2 x
// LeaseTTL of 1s), whose client reports its index reads to the hook.
func newIndex(t *testing.T) (*Index, *redis.Client, *indexReadHook) {
	t.Helper()
	c := newRedis(t)
	h := &indexReadHook{}
	c.AddHook(h)
	return NewIndex(c, 2*time.Second), c, h
}

func mustPartitions(t *testing.T, x *Index, category string) []string {
	t.Helper()
	keys, err := x.Partitions(ctxT(t), category)
	if err != nil {
		t.Fatal(err)
	}
	keys = slices.Clone(keys)
	slices.Sort(keys)
	return keys
}

// A key the kept index holds, removed by another instance's reaper and
// published again while this instance's read of the index is in flight
// (answered before the key came back): its signal, processed against the
// old kept index that still lists it, must not be dropped, or the new
// index (without the key) is kept for 2 x LeaseTTL. The next discovery
// cycle reads the index again and finds it; once found, no signal means
// no further read.
func TestIndexSignalDuringReadOfARepublishedKey(t *testing.T) {
	x, c, h := newIndex(t)
	ctx, cat := ctxT(t), "order"
	if err := c.SAdd(ctx, rdb.IndexKey(cat), "k").Err(); err != nil {
		t.Fatal(err)
	}
	if got := mustPartitions(t, x, cat); !slices.Equal(got, []string{"k"}) {
		t.Fatalf("first read: %v, want [k]", got)
	}
	// Another instance's reaper removes k; a new key j is published, so
	// the next cycle reads the index.
	if err := c.SRem(ctx, rdb.IndexKey(cat), "k").Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.SAdd(ctx, rdb.IndexKey(cat), "j").Err(); err != nil {
		t.Fatal(err)
	}
	x.Signalled(cat, "j")
	// While that read is in flight (answered: [j]), a publisher adds k
	// back and signals it.
	h.onNextRead(func() {
		if err := c.SAdd(context.Background(), rdb.IndexKey(cat), "k").Err(); err != nil {
			t.Error(err)
		}
		x.Signalled(cat, "k")
	})
	if got := mustPartitions(t, x, cat); !slices.Equal(got, []string{"j"}) {
		t.Fatalf("read in flight: %v, want [j] (it was answered before k came back)", got)
	}
	if got := mustPartitions(t, x, cat); !slices.Equal(got, []string{"j", "k"}) {
		t.Fatalf("the cycle after the read: %v, want [j k]: the republished key's signal was dropped", got)
	}
	n := h.count()
	for range 3 {
		mustPartitions(t, x, cat)
	}
	if got := h.count(); got != n {
		t.Fatalf("%d index reads without a signal, want 0", got-n)
	}
}

// A signal during a read for a key that read holds costs no extra read:
// a busy engine, whose keys are signalled all the time, does not read its
// index every cycle.
func TestIndexSignalDuringReadOfAHeldKey(t *testing.T) {
	x, c, h := newIndex(t)
	ctx, cat := ctxT(t), "order"
	if err := c.SAdd(ctx, rdb.IndexKey(cat), "k", "j").Err(); err != nil {
		t.Fatal(err)
	}
	mustPartitions(t, x, cat)
	x.Invalidate(cat)
	h.onNextRead(func() { x.Signalled(cat, "k") })
	mustPartitions(t, x, cat)
	n := h.count()
	x.Signalled(cat, "k")
	x.Signalled(cat, "j")
	if got := mustPartitions(t, x, cat); !slices.Equal(got, []string{"j", "k"}) {
		t.Fatalf("partitions: %v, want [j k]", got)
	}
	if got := h.count(); got != n {
		t.Fatalf("%d index reads after signals of held keys, want 0", got-n)
	}
}

// Signals trimmed before they were read (the waiter's gap, invalidate)
// while a read is in flight: that read, sent before a key whose only
// signal was lost joined the index, must not be kept as current.
func TestIndexInvalidateDuringRead(t *testing.T) {
	x, c, h := newIndex(t)
	ctx, cat := ctxT(t), "order"
	if err := c.SAdd(ctx, rdb.IndexKey(cat), "k").Err(); err != nil {
		t.Fatal(err)
	}
	mustPartitions(t, x, cat)
	x.Signalled(cat, "j") // a new key: the next call reads
	h.onNextRead(func() {
		if err := c.SAdd(context.Background(), rdb.IndexKey(cat), "m").Err(); err != nil {
			t.Error(err)
		}
		x.Invalidate(cat) // m's signal was trimmed unread
	})
	if got := mustPartitions(t, x, cat); !slices.Equal(got, []string{"k"}) {
		t.Fatalf("read in flight: %v, want [k]", got)
	}
	if got := mustPartitions(t, x, cat); !slices.Equal(got, []string{"k", "m"}) {
		t.Fatalf("the cycle after the gap: %v, want [k m]: the invalidation was lost to the read in flight", got)
	}
}
