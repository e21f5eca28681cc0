package runtime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
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
// The loop runs only while partitions wait, one barrier at a time, and
// ends when none does; Run waits for it before it returns.
type replicaBarrier struct {
	c       redis.UniversalClient
	n       int
	timeout time.Duration
	backoff time.Duration
	log     *slog.Logger

	mu sync.Mutex
	// replid is the primary the last barrier reached; since is when the
	// first barrier that reached it was answered; done when the newest
	// barrier that n of its replicas acknowledged was sent.
	replid      string
	since, done time.Time
	waiting     int
	running     bool
	changed     chan struct{} // closed and replaced when since or done moves
	loops       sync.WaitGroup
	renewals    sync.WaitGroup // confirmRenewals goroutines

	// short counts barriers that failed or came back with fewer than n
	// acknowledgements (and shortMetric, seqby.replicas.short); warnAt
	// spaces their warnings.
	short       atomic.Int64
	shortMetric metric.Int64Counter
	warnAt      atomic.Int64
}

// replicaWarnEvery spaces the warnings of barriers that come back short.
const replicaWarnEvery = 30 * time.Second

func newReplicaBarrier(c redis.UniversalClient, o Options, log *slog.Logger, short metric.Int64Counter) *replicaBarrier {
	if o.ReplicaAcks <= 0 {
		return nil
	}
	return &replicaBarrier{c: c, n: o.ReplicaAcks, timeout: o.ReplicaTimeout, backoff: o.RetryBackoff, log: log,
		changed: make(chan struct{}), shortMetric: short}
}

// wait returns once a barrier sent after after was acknowledged by n
// replicas of the primary that every barrier answered since from
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
func (b *replicaBarrier) wait(ctx context.Context, from, after time.Time, release <-chan struct{}, left func() time.Duration) (time.Time, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.waiting++
	defer func() { b.waiting-- }()
	var giveUp <-chan time.Time
	for {
		if b.since.After(from) {
			return time.Time{}, errPrimaryChanged
		}
		if b.done.After(after) {
			return b.done, nil
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
			return time.Time{}, ctx.Err()
		case <-release:
			release = nil
			t := time.NewTimer(max(left(), 0))
			defer t.Stop()
			giveUp = t.C
		case <-giveUp:
			b.mu.Lock()
			return time.Time{}, errGaveUp
		case <-ch:
		}
		b.mu.Lock()
	}
}

// errGaveUp ends a partition asked to hand over or stop whose replicas did
// not acknowledge within the release grace.
var errGaveUp = errors.New("replicas did not acknowledge before the partition had to be released")

// loop sends barriers while partitions wait.
func (b *replicaBarrier) loop() {
	defer b.loops.Done()
	backoff := b.backoff
	for {
		b.mu.Lock()
		if b.waiting == 0 {
			b.running = false
			b.mu.Unlock()
			return
		}
		b.mu.Unlock()
		sent := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), b.timeout+5*time.Second)
		acks, err := b.send(ctx, sent)
		cancel()
		if err == nil && acks >= b.n {
			backoff = b.backoff
			continue
		}
		b.short.Add(1)
		b.shortMetric.Add(context.Background(), 1)
		b.warn(acks, err)
		if err != nil {
			// A refused or failed barrier returns at once (WAIT's timeout
			// did not run): wait before the next.
			time.Sleep(backoff)
			backoff = min(2*backoff, time.Second)
		}
	}
}

// send runs one barrier sent at sent and records what it found.
func (b *replicaBarrier) send(ctx context.Context, sent time.Time) (int, error) {
	acks, replid, err := rdb.Barrier(ctx, b.c, b.n, b.timeout)
	if err != nil {
		return 0, err
	}
	answered := time.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	moved := false
	if replid != b.replid {
		if b.replid != "" {
			b.log.Warn("seqby: Redis has a new primary; partitions whose writes may have been lost are claimed afresh", "replication_id", replid)
		}
		b.replid, b.since, moved = replid, answered, true
	}
	if acks >= b.n {
		b.done, moved = sent, true
	}
	if moved {
		close(b.changed)
		b.changed = make(chan struct{})
	}
	return acks, nil
}

// warn logs, at most once per replicaWarnEvery, a barrier that failed or
// came back short.
func (b *replicaBarrier) warn(acks int, err error) {
	now := time.Now().UnixNano()
	last := b.warnAt.Load()
	if now-last < int64(replicaWarnEvery) || !b.warnAt.CompareAndSwap(last, now) {
		return
	}
	if err != nil {
		b.log.Warn("seqby: a replica barrier failed; no handler attempt starts until one succeeds (Options.ReplicaAcks)", "err", err)
		return
	}
	b.log.Warn("seqby: fewer replicas than Options.ReplicaAcks acknowledged within ReplicaTimeout; no handler attempt starts until they do",
		"acknowledged", acks, "replica_acks", b.n, "replica_timeout", b.timeout)
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
	at, err := b.wait(ctx, p.durableAt, time.Now(), p.release, left)
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
// life, and Run waits for it.
func (b *replicaBarrier) confirmRenewals(ctx context.Context, parts []*partition, sent, answered time.Time, within time.Duration) {
	b.renewals.Add(1)
	go func() {
		defer b.renewals.Done()
		ctx, cancel := context.WithTimeout(ctx, within)
		defer cancel()
		if _, err := b.wait(ctx, sent, answered, nil, nil); err != nil {
			return
		}
		for _, p := range parts {
			p.renewed(sent)
		}
	}()
}

// checkReplication is Run's look at replication. In the strict mode it
// refuses (ErrReplicas) a server that is not a primary or has fewer
// replicas connected than ReplicaAcks, and sends the first barrier,
// which names the primary every later one is compared with. In the
// default mode it warns when a primary with replicas does not bound a
// split brain: without min-replicas-to-write, or with a
// min-replicas-max-lag longer than a lease lives, a primary cut off from
// its replicas goes on taking writes (renewals, acks, commits) that a
// failover discards, while another instance may claim the same
// partitions on the new primary.
func (e *Engine) checkReplication(ctx context.Context) error {
	if _, cluster := e.c.(*redis.ClusterClient); cluster || (e.replicas == nil && e.o.SkipEvictionCheck) {
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
	switch {
	case r.Role != "master":
		return fmt.Errorf("seqby engine: the Redis server is a %s, not a primary: %w", r.Role, ErrReplicas)
	case r.Replicas < e.o.ReplicaAcks:
		return fmt.Errorf("seqby engine: Options.ReplicaAcks is %d and the primary has %d replicas connected: %w", e.o.ReplicaAcks, r.Replicas, ErrReplicas)
	}
	// The first barrier names the primary. Replicas still catching up
	// (a first sync) only delay the first attempts, which wait for a
	// barrier of their own anyway.
	if r.Replicas > e.o.ReplicaAcks {
		e.log.Warn("seqby: Options.ReplicaAcks is below the number of replicas: a failover may promote a replica that did not acknowledge, and the strict mode's promise holds only for a failover to one that did; set ReplicaAcks to the number of replicas",
			"replica_acks", e.o.ReplicaAcks, "replicas", r.Replicas)
	}
	bctx, cancel := context.WithTimeout(ctx, e.o.ReplicaTimeout+5*time.Second)
	acks, err := e.replicas.send(bctx, time.Now())
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("seqby engine: first replica barrier: %w: %w", ErrReplicas, err)
	}
	if acks < e.o.ReplicaAcks {
		e.replicas.warn(acks, nil)
	}
	return nil
}
