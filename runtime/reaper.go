package runtime

import (
	"time"

	"github.com/seqby/seqby/runtime/internal/worker"
)

// Reaping (docs/operating.md, "Reaping") ends a cold partition: one whose lanes are
// empty, with nothing pending in any group, and to which nothing was
// published for ReapAfter. It takes three parts:
//
//   - its owner lets it go (its worker's cold release), in one script that
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
const coldRecheck = worker.IdleRecheck

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
