package runtime

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seqby/seqby/runtime/internal/rdb"
	"go.opentelemetry.io/otel/metric"
)

// ErrReplicas is returned by Run in the strict replication mode
// (Options.ReplicaAcks) when Redis cannot keep its promise: the server is
// not a primary, fewer replicas are connected than ReplicaAcks, or a
// first barrier (a write and WAIT) failed. Attach the missing replicas
// (the promise needs every replica a failover may promote), or leave the
// strict mode.
var ErrReplicas = errors.New("redis cannot keep the strict replication mode's promise")

// errPrimaryChanged ends a partition whose writes since its last barrier
// may have gone to a primary that a failover replaced: they may be lost,
// so the partition is claimed afresh and reads what the new primary has.
var errPrimaryChanged = errors.New("the Redis primary changed after the partition's last write confirmed on replicas; what it wrote since may be lost, so it is claimed afresh")

// replicaBarrier is the strict mode's confirmation that writes reached
// ReplicaAcks replicas. A barrier (rdb.Barrier) writes a key and WAITs on
// one connection; replication being one ordered stream, its success says
// that every write the primary made before it is on n replicas. So one
// barrier serves every partition that waits when it is sent (a group
// commit): a partition waits for a barrier sent after its own writes were
// answered.
//
// A barrier also names the primary it reached (its replication id; a
// promoted replica starts a new one). Writes answered by the old primary
// after a failover promoted a replica are lost when the old primary
// rejoins, and a barrier on the new primary says nothing of them: so a
// partition's wait fails (errPrimaryChanged) when a barrier sent after
// its last confirmed point met a new primary.
//
// On a Redis Cluster each shard is such a primary, failing over on its
// own, and a partition's keys share one hash slot: the state is kept per
// slot (off a cluster, slot 0 stands for the one primary). A barrier goes
// to each primary that serves a slot someone waits for, writing a key in
// each of those slots (rdb.BarrierSlots): a write that runs there proves
// the node served the slot, so the WAIT after it covers the slot's writes
// answered before; a slot moved away (MOVED) is left for a barrier on
// its new node. Primaries get their barriers in parallel, one at a time
// each, so a shard that does not answer holds up its own slots only.
//
// The loop runs only while someone waits, and ends when none does; Run
// waits for it before it returns.
type replicaBarrier struct {
	c       redis.UniversalClient
	cluster *redis.ClusterClient // nil off a cluster
	n       int
	timeout time.Duration
	backoff time.Duration
	log     *slog.Logger

	mu sync.Mutex
	// slots holds each slot's last barrier, by hash slot (at most 16384).
	slots map[int]*slotBarrier
	// waiting counts the waits per slot; running: the loop runs; arrived
	// tells the loop of a slot that began to be waited for.
	waiting  map[int]int
	running  bool
	arrived  chan struct{}
	changed  chan struct{} // closed and replaced when a slot's since or done moves
	loops    sync.WaitGroup
	renewals sync.WaitGroup // confirmRenewals goroutines

	// short counts barriers that failed or came back with fewer than n
	// acknowledgements (and shortMetric, seqby.replicas.short); warnAt
	// spaces their warnings.
	short       atomic.Int64
	shortMetric metric.Int64Counter
	warnAt      atomic.Int64

	// unowned: the handlers whose waiting partitions noteUnowned said.
	unowned map[string]bool
}

// slotBarrier is what the barriers found for one hash slot.
type slotBarrier struct {
	// replid is the primary the last barrier reached; since is when the
	// first barrier that reached it was answered; done when the newest
	// barrier that n of its replicas acknowledged was sent; shortAt when
	// the last one that failed or came back short was answered (zero
	// once one succeeds).
	replid               string
	since, done, shortAt time.Time
}

// replicaWarnEvery spaces the warnings of barriers that come back short.
const replicaWarnEvery = 30 * time.Second

func newReplicaBarrier(c redis.UniversalClient, o Options, log *slog.Logger, short metric.Int64Counter) *replicaBarrier {
	if o.ReplicaAcks <= 0 {
		return nil
	}
	cluster, _ := c.(*redis.ClusterClient)
	return &replicaBarrier{c: c, cluster: cluster, n: o.ReplicaAcks, timeout: o.ReplicaTimeout, backoff: o.RetryBackoff, log: log,
		slots: map[int]*slotBarrier{}, waiting: map[int]int{}, unowned: map[string]bool{},
		arrived: make(chan struct{}, 1), changed: make(chan struct{}), shortMetric: short}
}

// slotOf is the slot whose barriers cover key's writes: its hash slot on
// a cluster, else 0.
func (b *replicaBarrier) slotOf(key string) int {
	if b.cluster == nil {
		return 0
	}
	return rdb.Slot(key)
}

// wait returns once a barrier sent after after was acknowledged by n
// replicas of the primary that every barrier on slot answered since from
// reached, with that barrier's send time (the partition's next from). It
// fails with errPrimaryChanged when a barrier answered after from met
// another primary, with ctx's error when ctx ends first, and with
// errGaveUp once release is closed and left() is not above zero (a
// handover or a stop must not wait for replicas that do not come back).
//
// Writes sent after from go to the primary a barrier answered by then
// had met: go-redis's failover client drops its connections to the old
// primary when it switches. A barrier answered later may have run after
// them, on another primary, so a new primary seen by one fails the wait.
func (b *replicaBarrier) wait(ctx context.Context, slot int, from, after time.Time, release <-chan struct{}, left func() time.Duration) (time.Time, error) {
	var at time.Time
	var err error
	b.waitSlots(ctx, []int{slot}, from, after, release, left, func(_ int, a time.Time, e error) { at, err = a, e })
	return at, err
}

// waitSlots is wait for several slots at once: each is called once per
// slot (outside the barrier's lock) as soon as that slot's wait ends.
func (b *replicaBarrier) waitSlots(ctx context.Context, slots []int, from, after time.Time, release <-chan struct{}, left func() time.Duration, each func(slot int, at time.Time, err error)) {
	type ended struct {
		slot int
		at   time.Time
		err  error
	}
	pending := slices.Compact(slices.Sorted(slices.Values(slots)))
	var out []ended
	report := func() {
		b.mu.Unlock()
		for _, r := range out {
			each(r.slot, r.at, r.err)
		}
		out = out[:0]
		b.mu.Lock()
	}
	// endAll ends every pending slot's wait with err.
	endAll := func(err error) {
		for _, s := range pending {
			b.unwait(s)
			out = append(out, ended{s, time.Time{}, err})
		}
		pending = nil
		report()
	}
	var giveUp <-chan time.Time
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, s := range pending {
		if b.waiting[s]++; b.waiting[s] == 1 {
			select {
			case b.arrived <- struct{}{}:
			default:
			}
		}
	}
	for {
		pending = slices.DeleteFunc(pending, func(s int) bool {
			st := b.slots[s]
			switch {
			case st != nil && st.since.After(from):
				out = append(out, ended{s, time.Time{}, errPrimaryChanged})
			case st != nil && st.done.After(after):
				out = append(out, ended{s, st.done, nil})
			default:
				return false
			}
			b.unwait(s)
			return true
		})
		if len(out) > 0 {
			report()
		}
		if len(pending) == 0 {
			return
		}
		if !b.running {
			b.running = true
			b.loops.Add(1)
			go b.loop()
		}
		ch := b.changed
		b.mu.Unlock()
		select {
		case <-ctx.Done():
			b.mu.Lock()
			endAll(ctx.Err())
			return
		case <-release:
			release = nil
			t := time.NewTimer(max(left(), 0))
			defer t.Stop()
			giveUp = t.C
		case <-giveUp:
			b.mu.Lock()
			endAll(errGaveUp)
			return
		case <-ch:
		}
		b.mu.Lock()
	}
}

// unwait ends one wait on slot; b.mu is held.
func (b *replicaBarrier) unwait(slot int) {
	if b.waiting[slot]--; b.waiting[slot] <= 0 {
		delete(b.waiting, slot)
	}
}

// errGaveUp ends a partition asked to hand over or stop whose replicas did
// not acknowledge within the release grace.
var errGaveUp = errors.New("replicas did not acknowledge before the partition had to be released")

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
func (b *replicaBarrier) loop() {
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
func (b *replicaBarrier) groups(slots []int) []barrierGroup {
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
func (b *replicaBarrier) round(g barrierGroup, bo time.Duration) (failed bool) {
	ctx, cancel := context.WithTimeout(context.Background(), b.timeout+5*time.Second)
	defer cancel()
	acks, moved, err := b.send(ctx, g, time.Now())
	if err == nil && acks >= b.n && !moved {
		return false
	}
	if err != nil || acks < b.n {
		b.short.Add(1)
		b.shortMetric.Add(context.Background(), 1)
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
func (b *replicaBarrier) send(ctx context.Context, g barrierGroup, sent time.Time) (acks int, moved bool, err error) {
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

// probe sends one barrier to the primary of each of slots now (in
// parallel) and returns the slots whose barrier failed or came back
// short.
func (b *replicaBarrier) probe(ctx context.Context, slots []int) []int {
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

// name records, for slots, the primary replid that served them when it
// answered at answered, before any partition waits: Run's look at the
// primaries, which the barriers that follow are compared with.
func (b *replicaBarrier) name(slots []int, replid string, answered time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, s := range slots {
		b.slots[s] = &slotBarrier{replid: replid, since: answered}
	}
}

// shortFor reports whether slot's last barrier, answered within the last
// d, failed or came back short: the strict mode waits for its replicas.
func (b *replicaBarrier) shortFor(slot int, d time.Duration) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	st := b.slots[slot]
	return st != nil && !st.shortAt.IsZero() && time.Since(st.shortAt) < d
}

// noteUnowned says once, when it begins, that n of handler's partitions
// have work and no owner because the strict mode waits for their
// replicas (checkUnowned reports them no other way meanwhile), and once
// when none does any more. After a failover this lasts until the old
// primary rejoins as a replica: a warning, not an error per key.
func (b *replicaBarrier) noteUnowned(handler string, n int) {
	b.mu.Lock()
	was := b.unowned[handler]
	if n > 0 {
		b.unowned[handler] = true
	} else {
		delete(b.unowned, handler)
	}
	b.mu.Unlock()
	switch {
	case n > 0 && !was:
		b.log.Warn("seqby: partitions have work and no owner while the strict mode waits for their replicas (Options.ReplicaAcks): barriers on their primary fail or come back short, so no attempt starts; they run once enough replicas acknowledge again (after a failover: once the old primary rejoins as a replica, or a replacement is attached)",
			"handler", handler, "partitions", n, "replica_acks", b.n)
	case n == 0 && was:
		b.log.Info("seqby: no partition waits for replicas any more", "handler", handler)
	}
}

// confirmedFor reports whether a barrier acknowledged by n replicas was
// sent on slot within the last d.
func (b *replicaBarrier) confirmedFor(slot int, d time.Duration) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	st := b.slots[slot]
	return st != nil && time.Since(st.done) < d
}

// warn logs, at most once per replicaWarnEvery, a barrier that failed or
// came back short.
func (b *replicaBarrier) warn(addr string, acks int, err error) {
	now := time.Now().UnixNano()
	last := b.warnAt.Load()
	if now-last < int64(replicaWarnEvery) || !b.warnAt.CompareAndSwap(last, now) {
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

// awaitReplicas holds p's next attempt until its writes so far are on
// Options.ReplicaAcks replicas (a no-op in the default mode). A change of
// primary in between ends the partition (lost): it is claimed afresh.
// Only the partition's own goroutine calls it.
func (p *partition) awaitReplicas(ctx context.Context) error {
	b := p.e.replicas
	if b == nil {
		return nil
	}
	left := func() time.Duration { return time.Until(p.releasedAt().Add(p.e.releaseGrace())) }
	at, err := b.wait(ctx, b.slotOf(p.lease.Ref.Key), p.durableAt, time.Now(), p.release, left)
	if errors.Is(err, errPrimaryChanged) {
		p.lost(err)
		return err
	}
	if errors.Is(err, errGaveUp) {
		p.e.log.Warn("seqby: handing over without confirming the partition's last writes on replicas; the entry in hand, if any, runs again at the next owner",
			"handler", p.reg.Name, "stream", p.lanes[0], "replica_acks", b.n)
		return err
	}
	if err != nil {
		return err
	}
	p.durableAt = at
	return nil
}

// confirmRenewals, in the strict mode, moves the deadlines of the
// partitions renewed by a call sent at sent and answered at answered
// only once a barrier confirms the renewal on the replicas of the
// primary that took it: a renewal the old primary took with it would
// leave the lease expiring earlier on the new one than here, and another
// instance could claim it while this one still runs an attempt. It runs
// on its own goroutine (the heartbeat goes on), for at most a lease's
// life, and Run waits for it. On a cluster each slot's partitions move
// as soon as their own primary's barrier confirms them.
func (b *replicaBarrier) confirmRenewals(ctx context.Context, parts []*partition, sent, answered time.Time, within time.Duration) {
	bySlot := map[int][]*partition{}
	for _, p := range parts {
		s := b.slotOf(p.lease.Ref.Key)
		bySlot[s] = append(bySlot[s], p)
	}
	b.renewals.Add(1)
	go func() {
		defer b.renewals.Done()
		ctx, cancel := context.WithTimeout(ctx, within)
		defer cancel()
		b.waitSlots(ctx, slices.Collect(maps.Keys(bySlot)), sent, answered, nil, nil, func(slot int, _ time.Time, err error) {
			if err != nil {
				return
			}
			for _, p := range bySlot[slot] {
				p.renewed(sent)
			}
		})
	}()
}

// checkReplication is Run's look at replication. In the strict mode it
// refuses (ErrReplicas) a server that is not a primary or has fewer
// replicas connected than ReplicaAcks (on a cluster: any shard's
// primary), and names the primary (each shard's) that every later
// barrier is compared with. In the default mode it warns when a primary
// with replicas does not bound a split brain: without
// min-replicas-to-write, or with a min-replicas-max-lag longer than a
// lease lives, a primary cut off from its replicas goes on taking writes
// (renewals, acks, commits) that a failover discards, while another
// instance may claim the same partitions on the new primary.
func (e *Engine) checkReplication(ctx context.Context) error {
	if cc, cluster := e.c.(*redis.ClusterClient); cluster {
		if e.replicas == nil {
			return nil
		}
		return e.checkShards(ctx, cc)
	}
	if e.replicas == nil && e.o.SkipEvictionCheck {
		return nil
	}
	r, err := rdb.ReadReplication(ctx, e.c)
	if err != nil {
		if e.replicas != nil && ctx.Err() == nil {
			return fmt.Errorf("seqby engine: read Redis's replication (Options.ReplicaAcks; grant +info): %w: %w", ErrReplicas, err)
		}
		e.log.Warn("seqby: could not read Redis's replication; a failover's bounds are in docs/runtime.md", "err", err)
		return nil
	}
	if e.replicas == nil {
		lag := time.Duration(r.MinReplicasMaxLag) * time.Second
		switch {
		case r.Replicas == 0 || r.Role != "master":
		case r.Unchecked != nil:
			e.log.Warn("seqby: could not read min-replicas-to-write; a primary cut off from its replicas may take writes a failover discards (docs/runtime.md, \"Failover\")", "err", r.Unchecked)
		case r.MinReplicasToWrite == 0 || lag >= e.o.LeaseTTL:
			e.log.Warn("seqby: Redis has replicas but does not stop writing when cut off from them within a lease's life: set min-replicas-to-write 1 and min-replicas-max-lag below LeaseTTL, or use Options.ReplicaAcks (docs/runtime.md, \"Failover\")",
				"replicas", r.Replicas, "min_replicas_to_write", r.MinReplicasToWrite, "min_replicas_max_lag", lag, "lease_ttl", e.o.LeaseTTL)
		}
		return nil
	}
	if err := e.checkReplicas("the Redis server", r); err != nil {
		return err
	}
	// The first barrier names the primary. Replicas still catching up
	// (a first sync) only delay the first attempts, which wait for a
	// barrier of their own anyway.
	bctx, cancel := context.WithTimeout(ctx, e.o.ReplicaTimeout+5*time.Second)
	acks, _, err := e.replicas.send(bctx, barrierGroup{slots: []int{0}}, time.Now())
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("seqby engine: first replica barrier: %w: %w", ErrReplicas, err)
	}
	if acks < e.o.ReplicaAcks {
		e.replicas.warn("", acks, nil)
	}
	return nil
}

// checkReplicas refuses, in the strict mode, a server (what names it)
// that is not a primary or has fewer replicas connected than
// ReplicaAcks, and warns when it has more.
func (e *Engine) checkReplicas(what string, r rdb.Replication) error {
	switch {
	case r.Role != "master":
		return fmt.Errorf("seqby engine: %s is a %s, not a primary: %w", what, r.Role, ErrReplicas)
	case r.Replicas < e.o.ReplicaAcks:
		return fmt.Errorf("seqby engine: Options.ReplicaAcks is %d and %s has %d replicas connected: %w", e.o.ReplicaAcks, what, r.Replicas, ErrReplicas)
	case r.Replicas > e.o.ReplicaAcks:
		e.log.Warn("seqby: Options.ReplicaAcks is below the number of replicas: a failover may promote a replica that did not acknowledge, and the strict mode's promise holds only for a failover to one that did; set ReplicaAcks to the number of replicas",
			"server", what, "replica_acks", e.o.ReplicaAcks, "replicas", r.Replicas)
	}
	return nil
}

// checkShards is checkReplication on a Redis Cluster in the strict mode:
// every primary the client knows must have ReplicaAcks replicas
// connected, and each names, with its own view of the slots it serves
// (rdb.NodeSlots, one round trip), the primary of those slots. A slot no
// primary claims is named by its first barrier (its partitions waiting
// then are let go once, and claimed afresh).
func (e *Engine) checkShards(ctx context.Context, cc *redis.ClusterClient) error {
	var mu sync.Mutex
	var errs []error
	err := cc.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
		addr := node.Options().Addr
		r, slots, err := rdb.NodeSlots(ctx, node)
		answered := time.Now()
		if err == nil && len(slots) == 0 && r.Role == "master" {
			return nil // a primary that serves nothing yet (a scale-out): no partition writes there
		}
		if err == nil {
			err = e.checkReplicas("the cluster primary "+addr, r)
		} else {
			err = fmt.Errorf("seqby engine: read the replication of the cluster primary %s (Options.ReplicaAcks; grant +info +cluster|nodes): %w: %w", addr, ErrReplicas, err)
		}
		if err != nil {
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
			return nil
		}
		e.replicas.name(slots, r.ReplID, answered)
		return nil
	})
	if ctx.Err() != nil {
		return nil
	}
	if err != nil {
		return fmt.Errorf("seqby engine: list the cluster's primaries (Options.ReplicaAcks): %w: %w", ErrReplicas, err)
	}
	return errors.Join(errs...)
}
