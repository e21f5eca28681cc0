package discovery

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seqby/seqby/runtime/internal/lease"
	"github.com/seqby/seqby/runtime/internal/maintenance"
	"github.com/seqby/seqby/runtime/internal/membership"
	"github.com/seqby/seqby/runtime/internal/telemetry"
	"github.com/seqby/seqby/runtime/internal/wake"
	"github.com/seqby/seqby/runtime/internal/worker"
)

// Config is what a Discovery needs from the engine; New takes it.
type Config struct {
	// Client is the engine's Redis client.
	Client redis.UniversalClient
	// Owner is Options.OwnerID, announced in the member sets.
	Owner string
	// Incarnation is the engine's incarnation, the owner part of the
	// tokens of the leases it acquires.
	Incarnation string
	// LeaseTTL is Options.LeaseTTL: the leases' term, and the longest a
	// unit found held is skipped.
	LeaseTTL time.Duration
	// DiscoveryInterval is Options.DiscoveryInterval, the period of the
	// cycles.
	DiscoveryInterval time.Duration
	// ReapAfter is Options.ReapAfter: above 0, acquires refuse a
	// partition cold for that long, and discovery skips it.
	ReapAfter time.Duration
	// PartitionWarnThreshold is Options.PartitionWarnThreshold: a
	// category with more partitions is warned about and listed by Large.
	PartitionWarnThreshold int
	// BackfillSuffix is Options.BackfillSuffix, naming backfill lanes.
	BackfillSuffix string
	// Log gets the cycles' summaries and warnings.
	Log *slog.Logger

	// Index keeps the partition indexes between cycles.
	Index *Index
	// Wake counts the signals that end a cold mark.
	Wake *wake.Waiter
	// Workers is the owned set: claimed units join it, the share counts
	// it.
	Workers *worker.Set
	// Leases adopts a lease an acquire whose reply was lost left under
	// this incarnation's token.
	Leases *lease.Leases
	// Pauses reads each handler's pause at the start of its cycle.
	Pauses *lease.Pauses
	// Members is the instance record: announcements, health strikes and
	// benched partitions.
	Members *membership.Instance
	// Telemetry counts acquires and times the cycles.
	Telemetry *telemetry.Telemetry

	// KeyRule checks a partition key (the key rules stay in runtime); a
	// key it refuses is no unit.
	KeyRule func(category, field, value, suffix string) error
	// Unowned checks a handler's units for work without an owner, after
	// each cycle that listed them (maintenance.Maintenance.CheckUnowned);
	// nil checks nothing.
	Unowned func(ctx context.Context, handler string, units []maintenance.Unit)
}

// Handler is one keyed handler or sequential pm that discovery balances.
type Handler struct {
	// Name is Registration.Name.
	Name string
	// AckBatch is Registration.AckBatch.
	AckBatch int
	// PM: a sequential process manager, whose units are the correlation
	// values of all its categories together.
	PM bool
	// Categories are the partitioned categories it reads, in
	// registration order.
	Categories []string
}

// Discovery runs the discovery cycles of an engine's keyed handlers and
// sequential pms. Its zero value is not usable; New builds one.
type Discovery struct {
	cfg Config

	// mu guards the memos below, and nothing else.
	mu sync.Mutex
	// held holds, per handler, the units found held lately.
	held map[string]*heldMemo
	// cold holds the partitions an acquire found cold lately.
	cold map[string]coldMark
	// large holds the categories above PartitionWarnThreshold.
	large map[string]largeCategory
	// acquireLogs rate-limits the failed-acquire warning per handler.
	acquireLogs map[string]*acquireLog
	// discoveredAt is when each handler last listed its units.
	discoveredAt map[string]time.Time
}

// New returns the Discovery for cfg.
func New(cfg Config) *Discovery {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Unowned == nil {
		cfg.Unowned = func(context.Context, string, []maintenance.Unit) {}
	}
	if cfg.KeyRule == nil {
		cfg.KeyRule = func(string, string, string, string) error { return nil }
	}
	return &Discovery{cfg: cfg, held: map[string]*heldMemo{}, cold: map[string]coldMark{},
		large: map[string]largeCategory{}, acquireLogs: map[string]*acquireLog{}, discoveredAt: map[string]time.Time{}}
}

// Reset starts a Run: the held marks and the cycle times are per Run, so
// a second Run neither skips what the first found held nor counts as
// discovered before its first cycle.
func (d *Discovery) Reset() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.held, d.discoveredAt = map[string]*heldMemo{}, map[string]time.Time{}
}

// Index returns the Index the cycles read (Config.Index).
func (d *Discovery) Index() *Index { return d.cfg.Index }

// discovered records a cycle of handler that listed its units.
func (d *Discovery) discovered(handler string) {
	d.mu.Lock()
	d.discoveredAt[handler] = time.Now()
	d.mu.Unlock()
}

// LastCycle is when the last cycle that listed its units ended, for the
// handler of handlers that had one the longest ago; zero when one of them
// had none since Reset, or handlers is empty.
func (d *Discovery) LastCycle(handlers []string) time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	var oldest time.Time
	for i, h := range handlers {
		at := d.discoveredAt[h]
		if i == 0 || at.Before(oldest) {
			oldest = at
		}
	}
	return oldest
}

// Large returns the partition count of each category above
// PartitionWarnThreshold at its last cycle; nil when there is none.
func (d *Discovery) Large() map[string]int {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.large) == 0 {
		return nil
	}
	out := make(map[string]int, len(d.large))
	for c, l := range d.large {
		out[c] = l.partitions
	}
	return out
}

// ColdMarks is how many partitions are marked cold; tests read it.
func (d *Discovery) ColdMarks() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.cold)
}
