package replicas

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seqby/seqby/runtime/internal/rdb"
)

// barrierGroup is one barrier's target: a primary and the waited-for
// slots it serves (off a cluster: the one primary and slot 0). err: the
// slots' primary could not be found (a cluster without a usable slot map).
type barrierGroup struct {
	node  *redis.Client // nil off a cluster
	addr  string
	slots []int
	err   error
}

// loop sends barriers while someone waits: to each primary that serves a
// waited-for slot, one at a time per primary, the primaries in parallel.
// A primary whose barrier failed is sent the next after a backoff
// (doubling to a second); one that came back short at once (WAIT's
// timeout ran).
func (b *Barrier) loop() {
	defer b.loops.Done()
	type result struct {
		addr   string
		failed bool
	}
	inflight := map[string]bool{}
	backoff := map[string]time.Duration{}
	results := make(chan result)
	for {
		b.mu.Lock()
		if len(b.waiting) == 0 && len(inflight) == 0 {
			b.running = false
			b.mu.Unlock()
			return
		}
		slots := slices.Collect(maps.Keys(b.waiting))
		b.mu.Unlock()
		if len(slots) > 0 {
			for _, g := range b.groups(slots) {
				if inflight[g.addr] {
					continue
				}
				inflight[g.addr] = true
				bo := cmp.Or(backoff[g.addr], b.backoff)
				go func() {
					results <- result{g.addr, b.round(g, bo)}
				}()
			}
		}
		select {
		case r := <-results:
			delete(inflight, r.addr)
			if r.failed {
				backoff[r.addr] = min(2*cmp.Or(backoff[r.addr], b.backoff), time.Second)
			} else {
				delete(backoff, r.addr)
			}
		case <-b.arrived:
		}
	}
}

// groups sorts slots by the primary that serves them now, as the client
// sees it (the client's slot map, which a MOVED reloads).
func (b *Barrier) groups(slots []int) []barrierGroup {
	if b.cluster == nil {
		return []barrierGroup{{slots: []int{0}}}
	}
	ctx, cancel := context.WithTimeout(context.Background(), b.timeout+5*time.Second)
	defer cancel()
	by := map[string]*barrierGroup{}
	var out []*barrierGroup
	for _, s := range slots {
		node, err := b.cluster.MasterForKey(ctx, rdb.SlotBarrierKey(s))
		addr := ""
		if err == nil {
			addr = node.Options().Addr
		}
		g := by[addr]
		if g == nil {
			g = &barrierGroup{node: node, addr: addr, err: err}
			by[addr] = g
			out = append(out, g)
		}
		g.slots = append(g.slots, s)
	}
	groups := make([]barrierGroup, len(out))
	for i, g := range out {
		groups[i] = *g
	}
	return groups
}

// round sends one barrier to g and records it; failed: it could not run
// (and round waited bo before returning, so that the next does not
// follow at once).
func (b *Barrier) round(g barrierGroup, bo time.Duration) (failed bool) {
	ctx, cancel := context.WithTimeout(context.Background(), b.timeout+5*time.Second)
	defer cancel()
	acks, moved, err := b.send(ctx, g, time.Now())
	if err == nil && acks >= b.n && !moved {
		return false
	}
	if err != nil || acks < b.n {
		b.short.Add(1)
		b.onShort()
		b.warn(g.addr, acks, err)
	}
	if (moved || err != nil) && b.cluster != nil {
		// A slot moved (a failover, a reshard), or the node is down or
		// no longer a primary: ask the client for a fresh slot map (it
		// reloads on a MOVED of its own commands only, and these went to
		// the node directly). The reload runs in the background, so the
		// next barrier may still go to the same node, and be refused
		// again.
		b.cluster.ReloadState(ctx)
	}
	if err != nil || moved {
		// A refused or failed barrier returns at once (WAIT's timeout
		// did not run): wait before the next.
		time.Sleep(bo)
		return true
	}
	return false
}

// send runs one barrier sent at sent on g and records what it found for
// g's slots: acks, and moved when some slot's write was refused there
// (the node no longer serves it).
func (b *Barrier) send(ctx context.Context, g barrierGroup, sent time.Time) (acks int, moved bool, err error) {
	var replid string
	var refused []error
	switch {
	case g.err != nil:
		err = fmt.Errorf("find the primary of the slots: %w", g.err)
	case g.node == nil:
		acks, replid, err = rdb.Barrier(ctx, b.c, b.n, b.timeout)
	default:
		acks, replid, refused, err = rdb.BarrierSlots(ctx, g.node, g.slots, b.n, b.timeout)
	}
	answered := time.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	changed, newPrimary := false, false
	for i, s := range g.slots {
		if refused != nil && refused[i] != nil {
			moved = true
			continue
		}
		st := b.slots[s]
		if st == nil {
			st = &slotBarrier{}
			b.slots[s] = st
		}
		if err != nil || acks < b.n {
			st.shortAt = answered
		}
		if err != nil {
			continue
		}
		if replid != st.replid {
			newPrimary = newPrimary || st.replid != ""
			st.replid, st.since, changed = replid, answered, true
		}
		if acks >= b.n {
			st.done, st.shortAt, changed = sent, time.Time{}, true
		}
	}
	if newPrimary {
		b.log.Warn("seqby: Redis has a new primary; partitions whose writes may have been lost are claimed afresh", "replication_id", replid, "primary", g.addr)
	}
	if changed {
		close(b.changed)
		b.changed = make(chan struct{})
	}
	return acks, moved, err
}

// Probe sends one barrier to the primary of each of slots now (in
// parallel) and returns the slots whose barrier failed or came back
// short: the engine's unowned check asks it of slots nobody waited for
// lately.
func (b *Barrier) Probe(ctx context.Context, slots []int) []int {
	if len(slots) == 0 {
		return nil
	}
	var mu sync.Mutex
	var short []int
	var wg sync.WaitGroup
	for _, g := range b.groups(slots) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(ctx, b.timeout+5*time.Second)
			defer cancel()
			acks, _, err := b.send(ctx, g, time.Now())
			if err != nil || acks < b.n {
				mu.Lock()
				short = append(short, g.slots...)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return short
}

// warn logs, at most once per warnEvery, a barrier that failed or came
// back short.
func (b *Barrier) warn(addr string, acks int, err error) {
	now := time.Now().UnixNano()
	last := b.warnAt.Load()
	if now-last < int64(warnEvery) || !b.warnAt.CompareAndSwap(last, now) {
		return
	}
	attrs := []any{}
	if addr != "" {
		attrs = append(attrs, "primary", addr)
	}
	if err != nil {
		b.log.Warn("seqby: a replica barrier failed; no handler attempt starts until one succeeds (Options.ReplicaAcks)", append(attrs, "err", err)...)
		return
	}
	b.log.Warn("seqby: fewer replicas than Options.ReplicaAcks acknowledged within ReplicaTimeout; no handler attempt starts until they do",
		append(attrs, "acknowledged", acks, "replica_acks", b.n, "replica_timeout", b.timeout)...)
}
