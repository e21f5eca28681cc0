package replicas

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seqby/seqby/runtime/internal/rdb"
)

// Barrier is the strict mode's confirmation that writes reached
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
// partition's wait fails (ErrPrimaryChanged) when a barrier sent after
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
// waits for it (Drain) before it returns.
type Barrier struct {
	c       redis.UniversalClient
	cluster *redis.ClusterClient // nil off a cluster
	n       int
	timeout time.Duration
	backoff time.Duration
	log     *slog.Logger
	onShort func()

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
	renewals sync.WaitGroup // ConfirmRenewals goroutines

	// short counts barriers that failed or came back with fewer than n
	// acknowledgements (and onShort is told of each); warnAt spaces
	// their warnings.
	short  atomic.Int64
	warnAt atomic.Int64

	// unowned: the handlers whose waiting partitions NoteUnowned said.
	unowned map[string]bool
}

// Config is what a Barrier needs from the engine.
type Config struct {
	// Client is the engine's client: barriers run through it, so they
	// follow its writes to the primary it writes to.
	Client redis.UniversalClient
	// Acks is Options.ReplicaAcks; below 1 (the default mode) New
	// returns nil.
	Acks int
	// Timeout is Options.ReplicaTimeout, WAIT's timeout.
	Timeout time.Duration
	// Backoff is the first pause after a barrier that could not run
	// (Options.RetryBackoff), doubled up to a second.
	Backoff time.Duration
	// Log gets the barrier's warnings.
	Log *slog.Logger
	// OnShort, if set, is called once per barrier that failed or came
	// back short: the engine counts them in a metric.
	OnShort func()
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

// warnEvery spaces the warnings of barriers that come back short.
const warnEvery = 30 * time.Second

// New returns the barrier of the strict mode, or nil in the default mode
// (cfg.Acks below 1): the engine's nil check is the mode's switch.
func New(cfg Config) *Barrier {
	if cfg.Acks <= 0 {
		return nil
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	cluster, _ := cfg.Client.(*redis.ClusterClient)
	onShort := cfg.OnShort
	if onShort == nil {
		onShort = func() {}
	}
	return &Barrier{c: cfg.Client, cluster: cluster, n: cfg.Acks, timeout: cfg.Timeout, backoff: cfg.Backoff, log: cfg.Log,
		slots: map[int]*slotBarrier{}, waiting: map[int]int{}, unowned: map[string]bool{},
		arrived: make(chan struct{}, 1), changed: make(chan struct{}), onShort: onShort}
}

// SlotOf is the slot whose barriers cover key's writes: its hash slot on
// a cluster, else 0.
func (b *Barrier) SlotOf(key string) int {
	if b.cluster == nil {
		return 0
	}
	return rdb.Slot(key)
}

// Shorts counts the barriers that failed or came back short since New;
// tests watch it to know a wait went through short barriers.
func (b *Barrier) Shorts() int64 { return b.short.Load() }

// Await returns once a barrier sent after after was acknowledged by n
// replicas of the primary that every barrier on slot answered since from
// reached, with that barrier's send time (the partition's next from). It
// fails with ErrPrimaryChanged when a barrier answered after from met
// another primary, with ctx's error when ctx ends first, and with
// ErrGaveUp once release is closed and left() is not above zero (a
// handover or a stop must not wait for replicas that do not come back).
//
// Writes sent after from go to the primary a barrier answered by then
// had met: go-redis's failover client drops its connections to the old
// primary when it switches. A barrier answered later may have run after
// them, on another primary, so a new primary seen by one fails the wait.
func (b *Barrier) Await(ctx context.Context, slot int, from, after time.Time, release <-chan struct{}, left func() time.Duration) (time.Time, error) {
	var at time.Time
	var err error
	b.waitSlots(ctx, []int{slot}, from, after, release, left, func(_ int, a time.Time, e error) { at, err = a, e })
	return at, err
}

// waitSlots is Await for several slots at once: each is called once per
// slot (outside the barrier's lock) as soon as that slot's wait ends.
func (b *Barrier) waitSlots(ctx context.Context, slots []int, from, after time.Time, release <-chan struct{}, left func() time.Duration, each func(slot int, at time.Time, err error)) {
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
				out = append(out, ended{s, time.Time{}, ErrPrimaryChanged})
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
			endAll(ErrGaveUp)
			return
		case <-ch:
		}
		b.mu.Lock()
	}
}

// unwait ends one wait on slot; b.mu is held.
func (b *Barrier) unwait(slot int) {
	if b.waiting[slot]--; b.waiting[slot] <= 0 {
		delete(b.waiting, slot)
	}
}

// ShortFor reports whether slot's last barrier, answered within the last
// d, failed or came back short: the strict mode waits for its replicas.
func (b *Barrier) ShortFor(slot int, d time.Duration) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	st := b.slots[slot]
	return st != nil && !st.shortAt.IsZero() && time.Since(st.shortAt) < d
}

// ConfirmedFor reports whether a barrier acknowledged by n replicas was
// sent on slot within the last d.
func (b *Barrier) ConfirmedFor(slot int, d time.Duration) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	st := b.slots[slot]
	return st != nil && time.Since(st.done) < d
}

// NoteUnowned says once, when it begins, that n of handler's partitions
// have work and no owner because the strict mode waits for their
// replicas (the engine's unowned check reports them no other way
// meanwhile), and once when none does any more. After a failover this
// lasts until the old primary rejoins as a replica: a warning, not an
// error per key.
func (b *Barrier) NoteUnowned(handler string, n int) {
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

// ConfirmRenewals, in the strict mode, moves the deadlines of the
// partitions renewed by a call sent at sent and answered at answered
// only once a barrier confirms the renewal on the replicas of the
// primary that took it: a renewal the old primary took with it would
// leave the lease expiring earlier on the new one than here, and another
// instance could claim it while this one still runs an attempt. keys are
// the renewed leases' keys; done(i) moves keys[i]'s deadline. It runs on
// its own goroutine (the heartbeat goes on), for at most within (a
// lease's life), and Drain waits for it. On a cluster each slot's
// partitions move as soon as their own primary's barrier confirms them.
func (b *Barrier) ConfirmRenewals(ctx context.Context, keys []string, sent, answered time.Time, within time.Duration, done func(i int)) {
	bySlot := map[int][]int{}
	for i, k := range keys {
		s := b.SlotOf(k)
		bySlot[s] = append(bySlot[s], i)
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
			for _, i := range bySlot[slot] {
				done(i)
			}
		})
	}()
}

// Drain waits, at the end of Run, for the renewals' confirmations (ended
// with the heartbeat's context) and then for the loop, which ends after
// its barriers once nobody waits.
func (b *Barrier) Drain() {
	b.renewals.Wait()
	b.loops.Wait()
}
