package console

import (
	"context"
	"sync"
	"time"

	"github.com/seqby/seqby/runtime/inspect"
)

// kept is a read shared by the console's views. A view reads again
// when the kept read is older than the sampling interval (or ten times
// what the read took, whichever is longer) or was dropped, but only if
// the read is cheap (took under cheapRead); an expensive one, at many
// partitions, only the sampler renews, and views show it with its time.
// Its mutex is held across a read, so concurrent viewers wait for one
// read instead of each reading.
type kept[T any] struct {
	mu      sync.Mutex
	has     bool
	at      time.Time     // when the read started
	done    time.Time     // when it ended
	took    time.Duration // how long it took
	dropped bool          // an action changed what it shows
	val     T
}

// costFactor is how many times its own duration a shared read is kept
// at least, and how far apart the sampler starts its rounds at least.
const costFactor = 10

// cheapRead is the longest a read may have taken for a view to repeat
// it; a longer one the sampler alone renews.
const cheapRead = time.Second

// get returns the kept read and when it was taken, reading anew with
// read when there is none, when fresh (the sampler), or when it is
// expired or dropped and cheap.
func (k *kept[T]) get(ttl time.Duration, fresh bool, read func() (T, error)) (T, time.Time, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	stale := k.dropped || time.Since(k.done) >= max(ttl, costFactor*k.took)
	if !k.has || fresh || stale && k.took < cheapRead {
		at := time.Now()
		v, err := read()
		if err != nil {
			var zero T
			return zero, time.Time{}, err
		}
		k.has, k.at, k.done, k.took, k.dropped, k.val = true, at, time.Now(), time.Since(at), false, v
	}
	return k.val, k.at, nil
}

// peek returns the kept read, if any, without reading.
func (k *kept[T]) peek() (T, time.Time, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.val, k.at, k.has
}

// drop marks the read as changed by an action: the next view reads
// again if the read is cheap.
func (k *kept[T]) drop() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.dropped = true
}

// snapshots holds the latest whole read of each handler's partitions.
// Reading every partition of a handler costs a few commands per
// partition, seconds at 100,000 of them, so the views that need them all
// (the overview's counts, the sorted handler views, the histogram, the
// charts) share one read per handler per sampling interval, whatever
// the number of viewers. It holds one read per handler the sampler
// still sees; a console action marks them all dropped.
type snapshots struct {
	mu sync.Mutex
	by map[string]*kept[[]inspect.PartitionInfo]
}

func (s *snapshots) get(handler string) *kept[[]inspect.PartitionInfo] {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.by == nil {
		s.by = map[string]*kept[[]inspect.PartitionInfo]{}
	}
	k := s.by[handler]
	if k == nil {
		k = &kept[[]inspect.PartitionInfo]{}
		s.by[handler] = k
	}
	return k
}

// dropAll marks every read as changed by an action.
func (s *snapshots) dropAll() {
	s.mu.Lock()
	ks := make([]*kept[[]inspect.PartitionInfo], 0, len(s.by))
	for _, k := range s.by {
		ks = append(ks, k)
	}
	s.mu.Unlock()
	// Outside s.mu: a read may be holding a kept's mutex.
	for _, k := range ks {
		k.drop()
	}
}

// keep forgets the handlers not in known.
func (s *snapshots) keep(known map[string]bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for h := range s.by {
		if !known[h] {
			delete(s.by, h)
		}
	}
}

// partitions returns every partition of handler and when they were
// read: the shared read (kept.get says when it is read anew), or a new
// one when fresh.
func (c *Console) partitions(ctx context.Context, handler string, fresh bool) ([]inspect.PartitionInfo, time.Time, error) {
	return c.snaps.get(handler).get(c.o.SampleInterval, fresh, func() ([]inspect.PartitionInfo, error) {
		return c.in.Partitions(ctx, handler)
	})
}

// sharedPartitions returns the shared read of handler's partitions if
// there is one, without reading.
func (c *Console) sharedPartitions(handler string) ([]inspect.PartitionInfo, time.Time, bool) {
	return c.snaps.get(handler).peek()
}

// faults returns the faults the engines report, read at most once per
// sampling interval: a scan of the keyspace (the engines rewrite them
// each heartbeat anyway).
func (c *Console) faults(ctx context.Context, fresh bool) ([]inspect.Fault, time.Time, error) {
	return c.faultsRead.get(c.o.SampleInterval, fresh, func() ([]inspect.Fault, error) { return c.in.Faults(ctx) })
}
