package console

import (
	"context"
	"sync"
	"time"

	"github.com/seqby/seqby/runtime/inspect"
)

// snapshots holds the latest whole read of each handler's partitions.
// Reading every partition of a handler costs a few commands per
// partition, seconds at 100,000 of them, so the views that need them all
// (the overview's counts, the sorted handler views, the histogram, the
// charts) share one read per handler per sampling interval, whatever
// the number of viewers. It holds one read per handler the sampler
// still sees; a console action drops them all.
type snapshots struct {
	mu sync.Mutex
	by map[string]*snapshot
}

// snapshot is one handler's read. Its own mutex makes concurrent
// viewers of a stale read wait for one refresh instead of each reading.
type snapshot struct {
	mu   sync.Mutex
	at   time.Time // when it was read; zero when never or dropped
	rows []inspect.PartitionInfo
}

func (s *snapshots) get(handler string) *snapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.by == nil {
		s.by = map[string]*snapshot{}
	}
	sn := s.by[handler]
	if sn == nil {
		sn = &snapshot{}
		s.by[handler] = sn
	}
	return sn
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
	sn := c.snaps.get(handler)
	sn.mu.Lock()
	defer sn.mu.Unlock()
	if !fresh && !sn.at.IsZero() && time.Since(sn.at) < c.o.SampleInterval {
		return sn.rows, sn.at, nil
	}
	at := time.Now()
	rows, err := c.in.Partitions(ctx, handler)
	if err != nil {
		return nil, time.Time{}, err
	}
	sn.at, sn.rows = at, rows
	return rows, at, nil
}
