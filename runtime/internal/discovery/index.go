package discovery

import (
	"context"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seqby/seqby/runtime/internal/rdb"
)

// Index keeps the partition indexes between discovery cycles.
//
// Discovery needs each category's partition index every cycle, but
// reading a set of thousands of keys every second on every instance, when
// nothing changed, is most of an idle engine's cost on Redis. So an
// instance keeps the last index it read and reads it again only when it
// may have changed:
//   - a signal came for a key that the kept index does not hold: a
//     publisher adds the key to the index before it signals it, and
//     signals a key new to the index on the category's stream, which
//     every instance reads (package rdb's wake-ups; its owners alone
//     hear of later publishes), so those signals are the change stream
//     of additions. A signal that comes while a read is in flight counts
//     against what that read returns, not against the index kept before
//     it: the read may have been answered before the key was added back
//     (another instance's reaper removed it, a publisher re-added it), so
//     a signalled key the read lacks makes the next cycle read again,
//     where the old index, still holding the key, would have kept the
//     read for the refresh time;
//   - the refresh time passed (2 x LeaseTTL, 30 s by default): reapers on
//     other instances remove keys without a signal, and a publisher of
//     another version may not signal; a removed key kept a little longer
//     only costs a cold acquire;
//   - this instance's reaper removed keys, or the waiter found that
//     signals were trimmed before it read them (Invalidate; a read in
//     flight then is not kept as current either).
//
// An idle engine reads nothing: without signals the kept index stays
// current until the refresh time.
//
// The kept indexes are bounded by the categories this instance consumes.
// Its zero value is not usable; NewIndex builds one.
type Index struct {
	c       redis.UniversalClient
	refresh time.Duration

	mu   sync.Mutex
	cats map[string]*catIndex
	// unknown counts, per category, the signals of keys the kept index
	// did not hold when they came (or, when they came during a read, that
	// the read lacked) and the invalidations; a read is current while the
	// count is what it was when the read was sent.
	unknown map[string]uint64
	// reads are the reads in flight, per category.
	reads map[string]map[*indexRead]struct{}
}

// indexRead is one read of an index in flight and the keys signalled
// while it is (a few: a read takes a round trip).
type indexRead struct {
	signalled map[string]bool
}

type catIndex struct {
	keys      map[string]bool
	list      []string
	readAt    time.Time
	unknownAt uint64
}

// NewIndex returns an empty Index reading through c, which uses a kept
// index for refresh at most (the engine's is 2 x LeaseTTL).
func NewIndex(c redis.UniversalClient, refresh time.Duration) *Index {
	return &Index{c: c, refresh: refresh, cats: map[string]*catIndex{}, unknown: map[string]uint64{},
		reads: map[string]map[*indexRead]struct{}{}}
}

// Signalled notes a signal for the key (the waiter calls it for every
// signal it reads, under its own lock: this lock is taken last).
func (x *Index) Signalled(category, key string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if reads := x.reads[category]; len(reads) > 0 {
		// A read in flight may have been answered before the key joined
		// the index: each decides against what it returns.
		for r := range reads {
			r.signalled[key] = true
		}
		return
	}
	if ci := x.cats[category]; ci != nil && ci.keys[key] {
		return
	}
	x.unknown[category]++
}

// Invalidate makes the next Partitions call read category's index, even
// when a read in flight (sent before the change) stores its result.
func (x *Index) Invalidate(category string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	delete(x.cats, category)
	x.unknown[category]++
}

// Partitions returns category's partition keys (the index and the keys
// being reaped, as rdb.Partitions), read from Redis only when the kept
// copy may be out of date. The caller must not modify the slice.
func (x *Index) Partitions(ctx context.Context, category string) ([]string, error) {
	x.mu.Lock()
	ci, snap := x.cats[category], x.unknown[category]
	if ci != nil && ci.unknownAt == snap && time.Since(ci.readAt) < x.refresh {
		x.mu.Unlock()
		return ci.list, nil
	}
	r := &indexRead{signalled: map[string]bool{}}
	if x.reads[category] == nil {
		x.reads[category] = map[*indexRead]struct{}{}
	}
	x.reads[category][r] = struct{}{}
	x.mu.Unlock()
	sent := time.Now()
	keys, err := rdb.Partitions(ctx, x.c, category)
	var set map[string]bool
	if err == nil {
		set = make(map[string]bool, len(keys))
		for _, k := range keys {
			set[k] = true
		}
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	delete(x.reads[category], r)
	if len(x.reads[category]) == 0 {
		delete(x.reads, category)
	}
	if err != nil {
		if len(r.signalled) > 0 {
			x.unknown[category]++ // not decided: another read, kept meanwhile, may lack them
		}
		return nil, err
	}
	for k := range r.signalled {
		if !set[k] {
			// A signal of a key this read lacks: the read may predate the
			// key's return to the index. The next call reads again.
			x.unknown[category]++
			break
		}
	}
	x.cats[category] = &catIndex{keys: set, list: keys, readAt: sent, unknownAt: snap}
	return keys, nil
}

// Sizes returns the partition count of each category's kept index.
func (x *Index) Sizes() map[string]int {
	x.mu.Lock()
	defer x.mu.Unlock()
	out := make(map[string]int, len(x.cats))
	for cat, ci := range x.cats {
		out[cat] = len(ci.list)
	}
	return out
}
