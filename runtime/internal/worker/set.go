package worker

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seqby/seqby/runtime/internal/contract"
	"github.com/seqby/seqby/runtime/internal/executor"
	"github.com/seqby/seqby/runtime/internal/lease"
	"github.com/seqby/seqby/runtime/internal/membership"
	"github.com/seqby/seqby/runtime/internal/rdb"
	"github.com/seqby/seqby/runtime/internal/replicas"
	"github.com/seqby/seqby/runtime/internal/telemetry"
	"github.com/seqby/seqby/runtime/internal/wake"
)

// Config is what a Set and its workers need from the engine; New takes
// it.
type Config struct {
	// Client is the engine's Redis client.
	Client redis.UniversalClient
	// Batch carries the workers' fenced reads and acks in rounds, many
	// partitions per script call.
	Batch *rdb.Batcher
	// Wake wakes an idle worker when its lanes get entries.
	Wake *wake.Waiter
	// Exec runs the handlers on entries.
	Exec *executor.Executor
	// Leases holds each worker's lease and makes its gates.
	Leases *lease.Leases
	// Replicas confirms a worker's writes before its attempts and acks in
	// the strict mode (Options.ReplicaAcks); nil otherwise.
	Replicas *replicas.Barrier
	// Telemetry counts reclaimed entries and resolved halts.
	Telemetry *telemetry.Telemetry
	// Members is this instance's record: acks count as progress, and a
	// partition released for permanent Redis errors is benched there.
	Members *membership.Instance
	// Log gets the workers' notes, warnings and errors.
	Log *slog.Logger
	// Paused returns a handler's pause, nil when it is not paused.
	Paused func(handler string) *lease.HandlerPause
	// Trim runs retention on a worker's lanes (the category of each in
	// cats) and resets t when it succeeded; runtime owns retention.
	Trim func(ctx context.Context, handler string, t *Trims, cats, lanes []string)
	// Alert alerts a halt (OnHalt), the first report and each realert;
	// the worker logs it.
	Alert func(contract.Halt)
	// Options are the engine's options the workers read.
	Options
}

// Options are the values of the engine's Options a worker reads.
type Options struct {
	// Owner is Options.OwnerID, written in halt records.
	Owner string
	// LeaseTTL, HeartbeatInterval, RetryBackoff, MaxBackoff, VerifyBound,
	// ReapAfter, HaltRealertInterval, ReadAhead and BackfillSuffix are
	// Options' own.
	LeaseTTL, HeartbeatInterval, RetryBackoff, MaxBackoff, VerifyBound time.Duration
	ReapAfter, HaltRealertInterval                                     time.Duration
	ReadAhead                                                          int
	BackfillSuffix                                                     string
	// ReplicaAcks is Options.ReplicaAcks, named in a warning.
	ReplicaAcks int
	// PermanentErrors is runtime.PermanentRedisErrors and FaultBench
	// runtime.FaultBench: how many permanent Redis errors release a
	// partition, and how long this instance then leaves it alone.
	PermanentErrors int
	FaultBench      time.Duration
}

// Set is the engine's owned partitions, each with its worker, by id.
// Its zero value is not usable; New builds one.
type Set struct {
	cfg Config
	// mu guards m: discovery adds to it, workers remove themselves as
	// they end, the heartbeat and the gauges read it.
	mu sync.Mutex
	m  map[string]*Worker
}

// New returns an empty Set.
func New(cfg Config) *Set {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Paused == nil {
		cfg.Paused = func(string) *lease.HandlerPause { return nil }
	}
	if cfg.Telemetry == nil {
		cfg.Telemetry, _ = telemetry.New(telemetry.Config{}) // no-ops: no providers
	}
	return &Set{cfg: cfg, m: map[string]*Worker{}}
}

// Add puts w in the set, before it starts (Worker.Start).
func (s *Set) Add(w *Worker) {
	s.mu.Lock()
	s.m[w.unit.ID] = w
	s.mu.Unlock()
}

// remove takes w out of the set as it ends.
func (s *Set) remove(w *Worker) {
	s.mu.Lock()
	delete(s.m, w.unit.ID)
	s.mu.Unlock()
}

// Has reports whether partition id is owned here.
func (s *Set) Has(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.m[id]
	return ok
}

// Get returns the worker of partition id, if it is owned here.
func (s *Set) Get(id string) (*Worker, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w, ok := s.m[id]
	return w, ok
}

// Len is how many partitions are owned here.
func (s *Set) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m)
}

// Each calls f on every worker, holding the set's lock: f must not call
// the Set.
func (s *Set) Each(f func(*Worker)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, w := range s.m {
		f(w)
	}
}

// Helds lists the leases of the owned partitions, for the Renewer.
func (s *Set) Helds() []*lease.Held {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*lease.Held, 0, len(s.m))
	for _, w := range s.m {
		out = append(out, w.held)
	}
	return out
}

// Owned is how many partitions this instance owns per handler, in the
// order of handlers, not counting those it is losing or handing over
// (the unowned check trusts the sum): the instance record's Owned, for
// its announcements.
func (s *Set) Owned(handlers []string) []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	by := map[string]int{}
	for _, w := range s.m {
		if w.Holding() {
			by[w.unit.Handler]++
		}
	}
	out := make([]int, len(handlers))
	for i, h := range handlers {
		out[i] = by[h]
	}
	return out
}

// OwnedUnits tells, per unit id, whether this instance owns it, and how
// many of those its workers hold (not losing or handing them over): the
// unowned check's Owned, read under one lock so the two agree.
func (s *Set) OwnedUnits(ids []string) (owned []bool, holding int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	owned = make([]bool, len(ids))
	for i, id := range ids {
		w, ok := s.m[id]
		owned[i] = ok
		if ok && w.Holding() {
			holding++
		}
	}
	return owned, holding
}

// Mine lists handler's workers whose lease lives and that were not asked
// to hand over: its share, as discovery weighs it.
func (s *Set) Mine(handler string) []*Worker {
	s.mu.Lock()
	defer s.mu.Unlock()
	var mine []*Worker
	for _, w := range s.m {
		if w.unit.Handler == handler && !w.releasing() && w.held.Context().Err() == nil {
			mine = append(mine, w)
		}
	}
	return mine
}

// ReleaseAll asks every worker to hand over at its next boundary, as Run
// stops.
func (s *Set) ReleaseAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, w := range s.m {
		w.RequestRelease()
	}
}

// Status lists the owned partitions, unsorted.
func (s *Set) Status() []Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Status, 0, len(s.m))
	for _, w := range s.m {
		out = append(out, w.Status())
	}
	return out
}

// Gauges adds what the metrics' gauges report of the owned partitions to
// snap: those owned, paused ones, and those with work.
func (s *Set) Gauges(snap *telemetry.Snapshot) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, w := range s.m {
		if !w.Holding() {
			continue
		}
		snap.Owned[w.unit.Handler]++
		if w.Paused() || s.cfg.Paused(w.unit.Handler) != nil {
			snap.Paused[w.unit.Handler]++
		}
		if oldest, local, more := w.lag.Load(); oldest != 0 {
			// A pm: its categories, as in LeaseInfo.
			snap.Busy = append(snap.Busy, telemetry.Work{Handler: w.unit.Handler, Category: strings.Join(w.unit.Cats, ","),
				Key: w.unit.Key, Lanes: w.unit.Lanes, Oldest: oldest, Backlog: local, More: more})
		}
	}
}
