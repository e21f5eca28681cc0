package lease

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seqby/seqby/runtime/internal/rdb"
	"github.com/seqby/seqby/runtime/internal/replicas"
	"github.com/seqby/seqby/runtime/internal/telemetry"
	"github.com/seqby/seqby/runtime/internal/wake"
)

// Config is what an engine's leases need from it; New takes it.
type Config struct {
	// Client is the engine's Redis client.
	Client redis.UniversalClient
	// Batch carries the confirmations of many leases in one script call
	// per round.
	Batch *rdb.Batcher
	// Wake is poked when a lease's wake hash names its owner anew.
	Wake *wake.Waiter
	// Replicas confirms writes on replicas in the strict mode
	// (Options.ReplicaAcks); nil otherwise.
	Replicas *replicas.Barrier
	// Telemetry counts lost leases and times renewals.
	Telemetry *telemetry.Telemetry
	// Slots are the engine's concurrency slots, which a gate takes for
	// each attempt it admits (executor.Slots).
	Slots Slots
	// Log gets the leases' warnings.
	Log *slog.Logger
	// Incarnation is this engine's owner part of lease tokens
	// (membership.NewIncarnation): only its leases are adopted.
	Incarnation string
	// LeaseTTL, LeaseMargin, HeartbeatInterval and VerifyBound are
	// Options': a lease lives LeaseTTL, counts as lost LeaseMargin
	// earlier, is renewed every HeartbeatInterval, and an attempt starts
	// only within VerifyBound of a confirmation (the fence rule).
	LeaseTTL, LeaseMargin, HeartbeatInterval, VerifyBound time.Duration
	// RetryBackoff and MaxBackoff bound a gate's backoff after a failed
	// confirmation.
	RetryBackoff, MaxBackoff time.Duration
	// ReplicaAcks and ReplicaTimeout are Options': the strict mode's
	// replicas, which a raised admitted age must be stored on.
	ReplicaAcks    int
	ReplicaTimeout time.Duration
	// Paused returns a handler's pause, nil when it is not paused
	// (Pauses.Paused): a gate admits no attempt of a paused handler.
	Paused func(handler string) *HandlerPause
}

// Slots bound how many attempts run at once: executor.Slots, or a test's
// own.
type Slots interface {
	// Acquire waits for a slot; false when ctx ended first.
	Acquire(ctx context.Context) bool
	// Release frees a slot Acquire took.
	Release()
}

// Leases is an engine's keyed leases: it holds each lease a worker runs
// under (Hold) and keeps what their gates share. Its zero value is not
// usable; New builds one.
type Leases struct {
	cfg Config
	// epoch is when New ran, the base of the monotonic times kept in
	// atomics (Held.deadlineAt).
	epoch time.Time
	// ages are the admitted confirmation ages, per handler, that a gate
	// judges slot-held confirmations by.
	ages admitAges
	// slowConfirmAt is when a slow lease confirmation was last reported
	// (unix nanoseconds).
	slowConfirmAt atomic.Int64
	// lateConfirmAt is when a confirmation that started no attempt, for
	// its age, was last reported (unix nanoseconds).
	lateConfirmAt atomic.Int64
	// heldConfirmHook, nil but in tests, runs in a gate right after the
	// reply of a confirmation sent holding a concurrency slot came, to
	// make that reply late after Redis ran the call.
	heldConfirmHook func(*Held)
}

// New returns an engine's Leases, holding none yet.
func New(cfg Config) *Leases {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Telemetry == nil {
		cfg.Telemetry, _ = telemetry.New(telemetry.Config{}) // no-ops: no providers
	}
	if cfg.Paused == nil {
		cfg.Paused = func(string) *HandlerPause { return nil }
	}
	return &Leases{cfg: cfg, epoch: time.Now()}
}

// SetHeldConfirmHook sets a function each gate calls right after the
// reply of a confirmation it sent holding a concurrency slot. Tests only:
// set it before Run.
func (ls *Leases) SetHeldConfirmHook(f func(*Held)) { ls.heldConfirmHook = f }
