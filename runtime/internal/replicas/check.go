package replicas

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seqby/seqby/runtime/internal/rdb"
)

// CheckConfig is what Check needs besides the barrier.
type CheckConfig struct {
	// Client is the engine's client, the one the barrier was built on.
	Client redis.UniversalClient
	// Log gets the default mode's warnings and the strict mode's note of
	// more replicas than ReplicaAcks.
	Log *slog.Logger
	// LeaseTTL is Options.LeaseTTL: a primary cut off from its replicas
	// must stop writing within it.
	LeaseTTL time.Duration
	// Quiet is Options.SkipEvictionCheck: the default mode then reads
	// nothing.
	Quiet bool
}

// Check is Run's look at replication. In the strict mode (b not nil) it
// refuses (ErrReplicas) a server that is not a primary or has fewer
// replicas connected than ReplicaAcks (on a cluster: any shard's
// primary), and names the primary (each shard's) that every later
// barrier is compared with. In the default mode it warns when a primary
// with replicas does not bound a split brain: without
// min-replicas-to-write, or with a min-replicas-max-lag longer than a
// lease lives, a primary cut off from its replicas goes on taking writes
// (renewals, acks, commits) that a failover discards, while another
// instance may claim the same partitions on the new primary.
func Check(ctx context.Context, b *Barrier, cfg CheckConfig) error {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cc, cluster := cfg.Client.(*redis.ClusterClient); cluster {
		if b == nil {
			return nil
		}
		return b.checkShards(ctx, cc, cfg.Log)
	}
	if b == nil && cfg.Quiet {
		return nil
	}
	r, err := rdb.ReadReplication(ctx, cfg.Client)
	if err != nil {
		if b != nil && ctx.Err() == nil {
			return fmt.Errorf("seqby engine: read Redis's replication (Options.ReplicaAcks; grant +info): %w: %w", ErrReplicas, err)
		}
		cfg.Log.Warn("seqby: could not read Redis's replication; a failover's bounds are in docs/runtime.md", "err", err)
		return nil
	}
	if b == nil {
		lag := time.Duration(r.MinReplicasMaxLag) * time.Second
		switch {
		case r.Replicas == 0 || r.Role != "master":
		case r.Unchecked != nil:
			cfg.Log.Warn("seqby: could not read min-replicas-to-write; a primary cut off from its replicas may take writes a failover discards (docs/runtime.md, \"Failover\")", "err", r.Unchecked)
		case r.MinReplicasToWrite == 0 || lag >= cfg.LeaseTTL:
			cfg.Log.Warn("seqby: Redis has replicas but does not stop writing when cut off from them within a lease's life: set min-replicas-to-write 1 and min-replicas-max-lag below LeaseTTL, or use Options.ReplicaAcks (docs/runtime.md, \"Failover\")",
				"replicas", r.Replicas, "min_replicas_to_write", r.MinReplicasToWrite, "min_replicas_max_lag", lag, "lease_ttl", cfg.LeaseTTL)
		}
		return nil
	}
	if err := b.checkReplicas("the Redis server", r, cfg.Log); err != nil {
		return err
	}
	// The first barrier names the primary. Replicas still catching up
	// (a first sync) only delay the first attempts, which wait for a
	// barrier of their own anyway.
	bctx, cancel := context.WithTimeout(ctx, b.timeout+5*time.Second)
	acks, _, err := b.send(bctx, barrierGroup{slots: []int{0}}, time.Now())
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("seqby engine: first replica barrier: %w: %w", ErrReplicas, err)
	}
	if acks < b.n {
		b.warn("", acks, nil)
	}
	return nil
}

// checkReplicas refuses, in the strict mode, a server (what names it)
// that is not a primary or has fewer replicas connected than
// ReplicaAcks, and warns when it has more.
func (b *Barrier) checkReplicas(what string, r rdb.Replication, log *slog.Logger) error {
	switch {
	case r.Role != "master":
		return fmt.Errorf("seqby engine: %s is a %s, not a primary: %w", what, r.Role, ErrReplicas)
	case r.Replicas < b.n:
		return fmt.Errorf("seqby engine: Options.ReplicaAcks is %d and %s has %d replicas connected: %w", b.n, what, r.Replicas, ErrReplicas)
	case r.Replicas > b.n:
		log.Warn("seqby: Options.ReplicaAcks is below the number of replicas: a failover may promote a replica that did not acknowledge, and the strict mode's promise holds only for a failover to one that did; set ReplicaAcks to the number of replicas",
			"server", what, "replica_acks", b.n, "replicas", r.Replicas)
	}
	return nil
}

// checkShards is Check on a Redis Cluster in the strict mode: every
// primary the client knows must have ReplicaAcks replicas connected, and
// each names, with its own view of the slots it serves (rdb.NodeSlots,
// one round trip), the primary of those slots. A slot no primary claims
// is named by its first barrier (its partitions waiting then are let go
// once, and claimed afresh).
func (b *Barrier) checkShards(ctx context.Context, cc *redis.ClusterClient, log *slog.Logger) error {
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
			err = b.checkReplicas("the cluster primary "+addr, r, log)
		} else {
			err = fmt.Errorf("seqby engine: read the replication of the cluster primary %s (Options.ReplicaAcks; grant +info +cluster|nodes): %w: %w", addr, ErrReplicas, err)
		}
		if err != nil {
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
			return nil
		}
		b.name(slots, r.ReplID, answered)
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

// name records, for slots, the primary replid that served them when it
// answered at answered, before any partition waits: Check's look at the
// primaries, which the barriers that follow are compared with.
func (b *Barrier) name(slots []int, replid string, answered time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, s := range slots {
		b.slots[s] = &slotBarrier{replid: replid, since: answered}
	}
}
