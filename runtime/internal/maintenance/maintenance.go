package maintenance

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seqby/seqby/runtime/internal/membership"
	"github.com/seqby/seqby/runtime/internal/rdb"
	"github.com/seqby/seqby/runtime/internal/replicas"
)

// Config is what a Maintenance needs from the engine; New takes it.
type Config struct {
	// Client is the engine's Redis client.
	Client redis.UniversalClient
	// Owner is Options.OwnerID, which the unowned check leaves out of
	// the other instances' counts.
	Owner string
	// Incarnation is the engine's incarnation, the owner part of the
	// maintenance lease's token.
	Incarnation string
	// LeaseTTL is Options.LeaseTTL: the maintenance lease's term, and
	// the period of the unowned check.
	LeaseTTL time.Duration
	// DiscoveryInterval is Options.DiscoveryInterval: how soon a free
	// partition is claimed, which UnownedAfter allows for, and the
	// shortest reaper period.
	DiscoveryInterval time.Duration
	// ReapAfter is Options.ReapAfter: how long a partition stays cold
	// before it is reaped, as this engine announces it; 0 or less: never
	// (Run returns at once, announcing nothing and never leading).
	ReapAfter time.Duration
	// BackfillSuffix is Options.BackfillSuffix, naming this engine's
	// backfill lanes, announced with its categories.
	BackfillSuffix string
	// MemberTTL is how long a member announcement lasts
	// (membership.Instance.MemberTTL).
	MemberTTL time.Duration
	// Log gets the warnings, errors and pass summaries.
	Log *slog.Logger
	// Replicas is the strict mode's barrier (Options.ReplicaAcks); nil in
	// the default mode.
	Replicas *replicas.Barrier

	// Adopt takes back a lease Redis holds under this incarnation's
	// token, found by an acquire whose first run's reply was lost, and
	// reports the time its confirming renewal was sent in *sent; nil
	// adopts nothing.
	Adopt func(ctx context.Context, ref rdb.LeaseRef, err error, sent *time.Time) (rdb.Lease, bool)
	// Invalidate drops what the engine caches of a category's index,
	// after a pass reaped some of its partitions; nil: nothing cached.
	Invalidate func(category string)
	// Owned tells, per unit id, whether this instance owns it, and how
	// many of them its workers hold (own and are not releasing): the
	// engine keeps the owned set. Called without the Maintenance's lock.
	Owned func(ids []string) (owned []bool, holding int64)
	// Report records a partition reported unowned (a
	// membership.FaultUnowned fault; Status and the faults report list
	// it) and alerts OnFault. Called without the Maintenance's lock.
	Report func(id string, f membership.Fault)
	// Clear forgets the fault Report recorded for id, once the partition
	// has an owner again or nothing left to do.
	Clear func(id string)
}

// Maintenance keeps an engine's partitions tidy: it reaps cold
// partitions (Run), trims what every group acked (Trim), and reports
// partitions left without an owner (CheckUnowned). Its zero value is not
// usable; New builds one.
type Maintenance struct {
	cfg Config

	// mu guards the unowned check's state, and nothing else.
	mu sync.Mutex
	// unowned holds the units seen without an owner, by id; bounded by
	// the units in the indexes (CheckUnowned forgets the others).
	unowned map[string]unownedMark
	// checkedAt is when each handler was last checked.
	checkedAt map[string]time.Time
	// ownedTotal is, per handler, the partitions owned across the live
	// instances at the last check.
	ownedTotal map[string]int64

	// lease is the maintenance lease while this instance leads (nil
	// otherwise), and renewed when its last renewal (or acquire) was
	// sent. Only Run's goroutine touches them.
	lease   *rdb.Lease
	renewed time.Time
	// stats counts what the leader did, for tests.
	stats stats
	// beforeReap, nil but in tests, runs before each partition's reap.
	beforeReap func(key string)
}

// stats are the leader's counts since New.
type stats struct {
	leads, renewals, losses, passes, reaped atomic.Int64
}

// New returns the Maintenance for cfg.
func New(cfg Config) *Maintenance {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Owned == nil {
		cfg.Owned = func(ids []string) ([]bool, int64) { return make([]bool, len(ids)), 0 }
	}
	if cfg.Report == nil {
		cfg.Report = func(string, membership.Fault) {}
	}
	if cfg.Clear == nil {
		cfg.Clear = func(string) {}
	}
	if cfg.Invalidate == nil {
		cfg.Invalidate = func(string) {}
	}
	return &Maintenance{cfg: cfg, unowned: map[string]unownedMark{}, checkedAt: map[string]time.Time{},
		ownedTotal: map[string]int64{}}
}

// Reset starts a Run: the unowned marks are per Run, like the faults
// they lead to, so a second Run does not report the first one's.
func (m *Maintenance) Reset() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.unowned, m.checkedAt = map[string]unownedMark{}, map[string]time.Time{}
}
