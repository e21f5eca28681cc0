package runtime

import (
	"context"
	"sync"
	"time"

	"github.com/seqby/seqby/runtime/internal/rdb"
)

// Discovery needs each category's partition index every cycle, but
// reading a set of thousands of keys every second on every instance, when
// nothing changed, is most of an idle engine's cost on Redis. So an
// instance keeps the last index it read and reads it again only when it
// may have changed:
//   - a signal came for a key that the kept index does not hold: a
//     publisher adds the key to the index before it signals it (one
//     MULTI/EXEC on a single Redis; on a cluster, the index before the
//     signal in the category's slot), so the signal is the change stream
//     of additions;
//   - indexRefresh passed (2 x LeaseTTL, 30 s by default): reapers on
//     other instances remove keys without a signal, and a publisher of
//     another version may not signal; a removed key kept a little longer
//     only costs a cold acquire;
//   - this instance's reaper removed keys.
//
// The kept indexes are bounded by the categories this instance consumes.
type indexCache struct {
	mu   sync.Mutex
	cats map[string]*catIndex
	// unknown counts, per category, the signals of keys the kept index
	// did not hold when they came; a read is current while the count is
	// what it was when the read was sent.
	unknown map[string]uint64
}

type catIndex struct {
	keys      map[string]bool
	list      []string
	readAt    time.Time
	unknownAt uint64
}

// indexRefresh is how long a kept index is used at most.
func (e *Engine) indexRefresh() time.Duration { return 2 * e.o.LeaseTTL }

func newIndexCache() *indexCache {
	return &indexCache{cats: map[string]*catIndex{}, unknown: map[string]uint64{}}
}

// signalled notes a signal for the key (the waiter calls it for every
// signal it reads, under its own lock: this lock is taken last).
func (x *indexCache) signalled(category, key string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if ci := x.cats[category]; ci != nil && ci.keys[key] {
		return
	}
	x.unknown[category]++
}

// invalidate makes the next partitions call read category's index.
func (x *indexCache) invalidate(category string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	delete(x.cats, category)
}

// partitions returns category's partition keys (the index and the keys
// being reaped, as rdb.Partitions), read from Redis only when the kept
// copy may be out of date. The caller must not modify the slice.
func (e *Engine) partitions(ctx context.Context, category string) ([]string, error) {
	x := e.index
	x.mu.Lock()
	ci, snap := x.cats[category], x.unknown[category]
	if ci != nil && ci.unknownAt == snap && time.Since(ci.readAt) < e.indexRefresh() {
		x.mu.Unlock()
		return ci.list, nil
	}
	x.mu.Unlock()
	sent := time.Now()
	keys, err := rdb.Partitions(ctx, e.c, category)
	if err != nil {
		return nil, err
	}
	set := make(map[string]bool, len(keys))
	for _, k := range keys {
		set[k] = true
	}
	x.mu.Lock()
	x.cats[category] = &catIndex{keys: set, list: keys, readAt: sent, unknownAt: snap}
	x.mu.Unlock()
	return keys, nil
}

// sizes returns the partition count of each category's kept index.
func (x *indexCache) sizes() map[string]int {
	x.mu.Lock()
	defer x.mu.Unlock()
	out := make(map[string]int, len(x.cats))
	for cat, ci := range x.cats {
		out[cat] = len(ci.list)
	}
	return out
}
