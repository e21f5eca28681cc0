package unkeyed

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seqby/seqby/runtime/internal/contract"
	"github.com/seqby/seqby/runtime/internal/executor"
	"github.com/seqby/seqby/runtime/internal/replicas"
	"github.com/seqby/seqby/runtime/internal/wake"
)

// Config is what a Runner needs from the engine; New takes it.
type Config struct {
	// Client is the engine's Redis client.
	Client redis.UniversalClient
	// Owner is Options.OwnerID, the consumer name in every group.
	Owner string
	// Exec runs the handlers; its Slots gate every attempt.
	Exec *executor.Executor
	// Wake wakes a partition's worker when its lanes get entries.
	Wake *wake.Waiter
	// Replicas confirms a handler's writes before the ack in the strict
	// mode (Options.ReplicaAcks); nil otherwise.
	Replicas *replicas.Barrier
	// Log gets the workers' warnings and errors.
	Log *slog.Logger

	// LeaseTTL is Options.LeaseTTL: how long a dead consumer's entry
	// stays pending before another instance claims it.
	LeaseTTL time.Duration
	// MemberTTL is how long a member announcement lasts
	// (membership.Instance.MemberTTL).
	MemberTTL time.Duration
	// HeartbeatInterval is Options.HeartbeatInterval: how often the
	// instance announces itself, and how long a live set read is shared.
	HeartbeatInterval time.Duration
	// DiscoveryInterval is Options.DiscoveryInterval, which paces the
	// checks for dead consumers.
	DiscoveryInterval time.Duration
	// BlockTimeout is Options.BlockTimeout, a plain worker's blocking read.
	BlockTimeout time.Duration
	// RetryBackoff and MaxBackoff are Options' bounds of the backoff
	// after a failed read.
	RetryBackoff, MaxBackoff time.Duration
	// IdleRecheck is the safety net re-read of an idle partition, should
	// a wake be lost; the engine's partitions use the same.
	IdleRecheck time.Duration
	// BackfillSuffix is Options.BackfillSuffix, naming backfill lanes.
	BackfillSuffix string

	// Partitions lists a category's partition keys (the engine's index).
	Partitions func(ctx context.Context, category string) ([]string, error)
	// KeyRule checks a partition key (the key rules stay in runtime); a
	// key it refuses gets no worker.
	KeyRule func(category, field, value, suffix string) error
	// Trims returns the retention of one worker's lanes (cats[i] is the
	// category of lanes[i]); runtime owns retention.
	Trims func(handler string, cats, lanes []string) Trimmer
	// OnHalt alerts a halt, once per entry while Halts lists it; nil
	// alerts nothing.
	OnHalt func(contract.Halt)
}

// Trimmer counts a worker's acks and trims its lanes once it is due.
type Trimmer interface {
	// Acked counts one ack.
	Acked()
	// TrimIf trims when due; drained: the last reads found the lanes
	// empty.
	TrimIf(ctx context.Context, drained bool)
}

// Runner runs an engine's unkeyed workers. It keeps, per handler with
// running workers, the member announcer and the entries halted on, and
// the halts Status lists. Its zero value is not usable; New builds one.
type Runner struct {
	cfg Config

	// membersMu guards members; workers join and leave on their own
	// goroutines.
	membersMu sync.Mutex
	members   map[string]*state

	// haltsMu guards halts, the latest unkeyed halts, for Status.
	haltsMu sync.Mutex
	halts   []contract.Halt
}

// New returns a Runner with no workers.
func New(cfg Config) *Runner {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Runner{cfg: cfg, members: map[string]*state{}}
}

// maxHalts bounds the unkeyed halts kept for Status.
const maxHalts = 100

// Halts returns a copy of the latest halts, oldest first.
func (r *Runner) Halts() []contract.Halt {
	r.haltsMu.Lock()
	defer r.haltsMu.Unlock()
	return append([]contract.Halt(nil), r.halts...)
}

// noteHalt adds h to the halts unless the same entry of the same handler
// is already there; false when it was.
func (r *Runner) noteHalt(h contract.Halt) bool {
	r.haltsMu.Lock()
	defer r.haltsMu.Unlock()
	for _, o := range r.halts {
		if o.Handler == h.Handler && o.Stream == h.Stream && o.EntryID == h.EntryID {
			return false
		}
	}
	r.halts = append(r.halts, h)
	if len(r.halts) > maxHalts {
		r.halts = r.halts[len(r.halts)-maxHalts:]
	}
	return true
}

// reportHalt logs an unkeyed halt and alerts OnHalt. Unlike a
// partition's halt nothing waits behind it.
func (r *Runner) reportHalt(h contract.Halt) {
	r.cfg.Log.Error("seqby: message left pending after its retries; the handler moves on (unkeyed: nothing waits behind it). It is not re-run by this instance; XACK it once handled, or another instance retries it after this one stops",
		"handler", h.Handler, "category", h.Category, "key", h.Key, "stream", h.Stream,
		"entry", h.EntryID, "type", h.MessageType, "reason", h.Reason, "err", h.Err)
	if r.cfg.OnHalt != nil {
		r.cfg.OnHalt(h)
	}
}
