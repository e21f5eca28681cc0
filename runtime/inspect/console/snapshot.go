package console

import (
	"context"
	"sync"
	"time"

	"github.com/seqby/seqby/runtime/inspect"
)

// kept is a read shared by the console's views until it is a sampling
// interval old, or ten times as old as the read took, whichever is
// longer: so the console spends at most a tenth of its time reading,
// however many partitions there are. Its mutex is held across a read,
// so concurrent viewers of a stale read wait for one refresh instead of
// each reading.
type kept[T any] struct {
	mu   sync.Mutex
	at   time.Time     // when it was read; zero when never or dropped
	took time.Duration // how long the read took
	val  T
}

// costFactor is how many times its own duration a shared read is kept
// at least (and the sampler waits between its rounds).
const costFactor = 10

// get returns the kept read and when it was taken while it is younger
// than ttl (and fresh is false), else reads anew with read.
func (k *kept[T]) get(ttl time.Duration, fresh bool, read func() (T, error)) (T, time.Time, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if fresh || k.at.IsZero() || time.Since(k.at) >= max(ttl, costFactor*k.took) {
		at := time.Now()
		v, err := read()
		if err != nil {
			var zero T
			return zero, time.Time{}, err
		}
		k.at, k.took, k.val = at, time.Since(at), v
	}
	return k.val, k.at, nil
}

// snapshots holds the latest whole read of each handler's partitions.
// Reading every partition of a handler costs a few commands per
// partition, seconds at 100,000 of them, so the views that need them all
// (the overview's counts, the sorted handler views, the histogram, the
// charts) share one read per handler per sampling interval, whatever
// the number of viewers. It holds one read per handler the sampler
// still sees; a console action drops them all.
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

// dropAll forgets every read, so the next views read again.
func (s *snapshots) dropAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.by)
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
// read: the shared read when it is younger than the sampling interval
// (and fresh is false), else a new one.
func (c *Console) partitions(ctx context.Context, handler string, fresh bool) ([]inspect.PartitionInfo, time.Time, error) {
	return c.snaps.get(handler).get(c.o.SampleInterval, fresh, func() ([]inspect.PartitionInfo, error) {
		return c.in.Partitions(ctx, handler)
	})
}

// faults returns the faults the engines report, read at most once per
// sampling interval: a scan of the keyspace (the engines rewrite them
// each heartbeat anyway).
func (c *Console) faults(ctx context.Context, fresh bool) ([]inspect.Fault, time.Time, error) {
	return c.faultsRead.get(c.o.SampleInterval, fresh, func() ([]inspect.Fault, error) { return c.in.Faults(ctx) })
}
