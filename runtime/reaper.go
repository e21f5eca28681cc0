package runtime

import (
	"errors"
	"math/rand/v2"
	"time"
)

// Reaping (docs/operating.md, "Reaping") ends a cold partition: one whose lanes are
// empty, with nothing pending in any group, and to which nothing was
// published for ReapAfter. It takes three parts:
//
//   - its owner lets it go (partition.releaseCold), in one script that
//     checks it is cold, so a publish either lands before (and the owner
//     keeps it) or finds it unowned;
//   - acquires refuse a cold partition (rdb.ErrCold), so nobody owns it
//     again until something is published to it; discovery then skips it
//     until a signal for its key arrives, or for coldRecheck;
//   - package maintenance removes the cold partitions nobody owns:
//     streams, groups, generations, the pm states' applied marks of the
//     streams, and index entry (rdb.Reap, whose doc shows why a
//     concurrent publish is never lost and why the marks must go with
//     their streams).

// coldRecheck is how long discovery skips a partition found cold, unless
// a signal for its key comes first (a publish also signals).
const coldRecheck = idleRecheck

// coldMark is a partition an acquire found cold: mark is the waiter's
// count before that acquire, so any signal for the key after it shows.
type coldMark struct {
	at   time.Time
	mark uint64
	cats []string
	key  string
}

// warm reports whether discovery should try to acquire partition id:
// not found cold lately, or signalled since.
func (e *Engine) warm(id string) bool {
	e.mu.Lock()
	m, ok := e.cold[id]
	e.mu.Unlock()
	if !ok {
		return true
	}
	fresh := time.Since(m.at) < coldRecheck
	for _, c := range m.cats {
		if e.wake.Since(c, m.key, m.mark) {
			fresh = false
		}
	}
	if !fresh {
		e.mu.Lock()
		delete(e.cold, id)
		e.mu.Unlock()
	}
	return !fresh
}

// markCold remembers that an acquire of id, sent after mark, found it cold.
func (e *Engine) markCold(id string, cats []string, key string, mark uint64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.cold == nil {
		e.cold = map[string]coldMark{}
	}
	e.cold[id] = coldMark{at: time.Now(), mark: mark, cats: cats, key: key}
}

// pruneCold forgets the cold marks older than coldRecheck, so the table
// holds at most the partitions found cold in the last coldRecheck
// (bounded by the indexes). Called every discovery cycle.
func (e *Engine) pruneCold() {
	e.mu.Lock()
	defer e.mu.Unlock()
	for id, m := range e.cold {
		if time.Since(m.at) >= coldRecheck {
			delete(e.cold, id)
		}
	}
}

// reaping reports whether cold partitions are let go and reaped.
func (e *Engine) reaping() bool { return e.o.ReapAfter > 0 }

// idleWait is how long an idle worker waits for a signal before it
// re-reads: idleRecheck, or idleRecheckEach per partition this instance
// owns if that is longer (so an instance re-reads about one idle
// partition a second at most, however many it owns), give or take a
// fifth (so the re-reads of partitions that went idle together spread out
// instead of arriving in one burst); or less when its partition turns cold
// sooner, or its acked entries are due to be trimmed (trimmer.wait).
func (p *partition) idleWait() time.Duration {
	d := p.safetyNet()
	if w := p.trims.wait(); w > 0 {
		d = min(d, w)
	}
	if p.e.reaping() {
		d = min(d, max(time.Until(p.active.Add(p.e.o.ReapAfter)), time.Millisecond))
	}
	return d
}

// safetyNet is idleWait without its early ends: the wait of a paused
// partition, which neither trims nor turns cold while paused (a read
// finds the pause, and the cold release refuses), so waking sooner would
// only read the pause again.
func (p *partition) safetyNet() time.Duration {
	p.e.mu.Lock()
	owned := len(p.e.parts)
	p.e.mu.Unlock()
	base := max(idleRecheck, time.Duration(owned)*idleRecheckEach)
	return base - base/5 + rand.N(2*base/5)
}

// releaseCold lets the partition go when it has been idle here for
// ReapAfter and Redis finds it cold; true: the worker must end.
func (p *partition) releaseCold() bool {
	e := p.e
	if !e.reaping() || time.Since(p.active) < e.o.ReapAfter {
		return false
	}
	ok, err := p.lease.ReleaseCold(p.ctx, e.c, e.o.ReapAfter, p.lanes)
	switch {
	case errors.Is(err, ErrFenced):
		p.lost(err)
		return true
	case err != nil:
		if p.ctx.Err() == nil {
			e.log.Warn("seqby: releasing a cold partition failed; keeping it for now", "handler", p.reg.Name, "stream", p.lanes[0], "err", err)
		}
	case ok:
		p.mu.Lock()
		p.gone = true
		p.mu.Unlock()
		// Debug: partitions idle since the same burst go cold together;
		// the reaper's pass logs how many it reaped.
		e.log.Debug("seqby: released a cold partition for the reaper", "handler", p.reg.Name, "partition", p.key, "idle_for", e.o.ReapAfter)
		return true
	}
	p.active = time.Now() // not cold (or unknown): look again after ReapAfter
	return false
}
