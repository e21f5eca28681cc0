package discovery

import (
	"time"

	"github.com/seqby/seqby/runtime/internal/worker"
)

// Acquires refuse a cold partition (rdb.ErrCold: its lanes empty,
// nothing pending, nothing published for ReapAfter), so nobody owns it
// again until something is published to it, and the maintenance leader
// may reap it. Trying it again every cycle would cost an acquire script
// each time, so discovery skips it until a signal for its key arrives (a
// publish also signals), or for coldRecheck.

// coldRecheck is how long discovery skips a partition found cold, unless
// a signal for its key comes first.
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
func (d *Discovery) warm(id string) bool {
	d.mu.Lock()
	m, ok := d.cold[id]
	d.mu.Unlock()
	if !ok {
		return true
	}
	fresh := time.Since(m.at) < coldRecheck
	for _, c := range m.cats {
		if d.cfg.Wake.Since(c, m.key, m.mark) {
			fresh = false
		}
	}
	if !fresh {
		d.mu.Lock()
		delete(d.cold, id)
		d.mu.Unlock()
	}
	return !fresh
}

// markCold remembers that an acquire of id, sent after mark, found it cold.
func (d *Discovery) markCold(id string, cats []string, key string, mark uint64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.cold[id] = coldMark{at: time.Now(), mark: mark, cats: cats, key: key}
}

// pruneCold forgets the cold marks older than coldRecheck, so the table
// holds at most the partitions found cold in the last coldRecheck
// (bounded by the indexes). Called every discovery cycle.
func (d *Discovery) pruneCold() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for id, m := range d.cold {
		if time.Since(m.at) >= coldRecheck {
			delete(d.cold, id)
		}
	}
}
