package wake

import (
	"context"
	"log/slog"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seqby/seqby/runtime/internal/rdb"
)

// Keeper keeps the Redis keys that decide which signal streams publishers
// append to. Publishers wake a partition's owners alone (rdb.WakeKey):
// each engine incarnation reads its own signal stream besides the
// categories' (the Waiter). Keep creates that stream at Run and renews it
// with each heartbeat, and the engine deletes it as Run returns;
// publishers never create it, so a killed instance's ends with its TTL
// (rdb.OwnerSignalTTL) and a publish meant for it signals the category's
// stream instead.
//
// An unkeyed handler on a partitioned category runs on every instance,
// for every partition, so its instances need every publish's signal: the
// Keeper keeps the category's fanout marker (rdb.FanoutKey) set, and
// publishers signal the category's stream while it is.
type Keeper struct {
	c           redis.UniversalClient
	w           *Waiter
	incarnation string
	log         *slog.Logger
	interval    time.Duration
	leaseTTL    time.Duration
	// fanout are the partitioned categories of unkeyed handlers, and
	// fanoutSeen their markers' values at the last Keep.
	fanout     []string
	fanoutSeen []string
}

// KeeperConfig is what a Keeper needs; NewKeeper takes it.
type KeeperConfig struct {
	// Client writes the stream and the markers.
	Client redis.UniversalClient
	// Waiter is woken (a gap) where signals may have been missed.
	Waiter *Waiter
	// Incarnation names this engine's signal stream (rdb.OwnerSignalKey).
	Incarnation string
	// Log gets the failed renewals, at debug level: the next Keep retries.
	Log *slog.Logger
	// Interval is the heartbeat's: it bounds each Keep.
	Interval time.Duration
	// LeaseTTL sets the fanout markers' TTL (see fanoutTTL).
	LeaseTTL time.Duration
	// Fanout lists, once each, the partitioned categories an unkeyed
	// handler reads.
	Fanout []string
}

// NewKeeper returns a Keeper for one Run; its first Keep is Run's.
func NewKeeper(cfg KeeperConfig) *Keeper {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Keeper{c: cfg.Client, w: cfg.Waiter, incarnation: cfg.Incarnation, log: cfg.Log,
		interval: cfg.Interval, leaseTTL: cfg.LeaseTTL,
		fanout: cfg.Fanout, fanoutSeen: make([]string, len(cfg.Fanout))}
}

// fanoutTTL is how long a fanout marker outlives the heartbeat that set
// it: two LeaseTTLs, so a late beat or two never lets it lapse.
func (k *Keeper) fanoutTTL() time.Duration { return 2 * k.leaseTTL }

// Keep renews this incarnation's signal stream and the fanout markers, at
// Run's start (first, before any worker) and each heartbeat. Every idle
// partition of a category wakes once to read (gap) when signals meant for
// it may have been missed: its own stream was lost with signals in it, or
// a marker lapsed or was lost (its value changed), when publishes may
// have signalled only the keyed owners. Only the heartbeat goroutine
// calls it after Run started.
func (k *Keeper) Keep(ctx context.Context, first bool) {
	ctx, cancel := context.WithTimeout(ctx, k.interval)
	defer cancel()
	var gaps []string
	created, err := rdb.KeepOwnerSignals(ctx, k.c, k.incarnation, 2*rdb.SignalBatch)
	if err != nil {
		k.log.Debug("seqby: renewing this instance's signal stream failed; the next heartbeat tries again", "err", err)
	}
	if created && !first {
		k.log.Debug("seqby: this instance's signal stream was gone; every idle partition reads once")
		gaps = k.w.categories()
	}
	if len(k.fanout) > 0 {
		epoch := k.incarnation + "/" + strconv.FormatInt(time.Now().UnixNano(), 36) // new at each beat
		vals, err := rdb.KeepFanout(ctx, k.c, k.fanout, epoch, k.fanoutTTL())
		if err != nil {
			k.log.Debug("seqby: renewing the fanout markers failed; the next heartbeat tries again", "err", err)
		}
		for i, v := range vals {
			if v != k.fanoutSeen[i] {
				k.fanoutSeen[i] = v
				if !first {
					gaps = append(gaps, k.fanout[i])
				}
			}
		}
	}
	if len(gaps) > 0 {
		k.w.gapAll(gaps)
	}
}

// gapAll is gap for each of cats, under one lock.
func (w *Waiter) gapAll(cats []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, cat := range cats {
		w.gap(cat)
	}
}

// categories are the categories whose signals the waiter follows.
func (w *Waiter) categories() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for _, cat := range w.cats {
		if cat != "" {
			out = append(out, cat)
		}
	}
	return out
}
