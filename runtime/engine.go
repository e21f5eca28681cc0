package runtime

import (
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seqby/seqby/runtime/internal/discovery"
	"github.com/seqby/seqby/runtime/internal/executor"
	"github.com/seqby/seqby/runtime/internal/lease"
	"github.com/seqby/seqby/runtime/internal/maintenance"
	"github.com/seqby/seqby/runtime/internal/membership"
	"github.com/seqby/seqby/runtime/internal/replicas"
	"github.com/seqby/seqby/runtime/internal/telemetry"
	"github.com/seqby/seqby/runtime/internal/unkeyed"
	"github.com/seqby/seqby/runtime/internal/wake"
	"github.com/seqby/seqby/runtime/internal/worker"
)

// Engine consumes Redis streams for registered handlers. It is the Redis
// broker: it advertises StreamPartitioning and ConsumerGroups. Keyed
// handlers get one owner per partition (lease + fence); unkeyed handlers
// share plain consumer groups. Run any number of engines, in any number of
// processes, against one Redis.
type Engine struct {
	reg *Registry
	c   redis.UniversalClient
	o   Options
	// incarnation is this engine's owner part of lease tokens and
	// consumer names, "<OwnerID>~<random>" (membership.NewIncarnation), drawn by
	// NewEngine. Its Runs follow one another in one process, so a later
	// Run may adopt what an earlier one left.
	incarnation string
	log         *slog.Logger

	// mu guards life, and nothing else: each component below keeps its
	// own state behind its own lock.
	mu   sync.Mutex
	life lifecycle
	// beat is the heartbeat's: the renewer of the leases, and when it
	// last ticked.
	beat heartbeat

	// telemetry records the engine's metrics and attempt spans (package
	// telemetry); no-ops unless Options gave providers.
	telemetry *telemetry.Telemetry
	// members is this instance's record among the others: its OwnerID
	// key, announcements, health strikes, faults and deploy records
	// (package membership).
	members *membership.Instance
	// exec runs the handlers on entries (package executor), and holds
	// the concurrency slots every attempt takes.
	exec *executor.Executor
	// replicas confirms writes on replicas in the strict mode
	// (Options.ReplicaAcks; nil otherwise).
	replicas *replicas.Barrier
	// wake wakes idle workers on the signals publishers send.
	wake *wake.Waiter
	// pauses are the whole-handler pauses discovery found.
	pauses *lease.Pauses
	// leases holds the partitions' leases and their gates' shared state
	// (package lease).
	leases *lease.Leases
	// workers are the owned partitions, each run by its worker (package
	// worker).
	workers *worker.Set
	// unkeyed runs the unkeyed handlers' workers, and keeps their member
	// announcers and halts (package unkeyed).
	unkeyed *unkeyed.Runner
	// maint reaps cold partitions, trims acked entries and checks for
	// unowned partitions (package maintenance).
	maint *maintenance.Maintenance
	// disc claims and hands over the keyed handlers' partitions each
	// discovery cycle, and keeps the indexes and its memos between
	// cycles (package discovery).
	disc *discovery.Discovery
}

// lifecycle is where an engine is between NewEngine and Run's return,
// under Engine.mu.
type lifecycle struct {
	// running: Run was called and has not returned (Status.Running).
	running bool
	// consuming: Run finished starting (Status.Consuming).
	consuming bool
	// handlers are the keyed handlers and sequential pms, announced as
	// members, as Run found them.
	handlers []string
	// startedAt is when Run started; Health measures the heartbeat's
	// and the renewals' ages from it until they first happen.
	startedAt time.Time
}

// heartbeat is what Run's heartbeat keeps: the renewer of every owned
// lease, and as Unix nanoseconds when the heartbeat last ticked (zero:
// never), which Health reads without a lock.
type heartbeat struct {
	renewer *lease.Renewer
	at      atomic.Int64
}

// NewEngine returns an engine reading through c. Register handlers, then
// call Run. For prompt shutdown of blocking reads, build c with
// ContextTimeoutEnabled: true (reads are bounded by BlockTimeout anyway).
//
// At most one Options is used; none means all defaults.
func NewEngine(c redis.UniversalClient, options ...Options) (*Engine, error) {
	var opts Options
	if len(options) > 0 {
		opts = options[0]
	}
	o, err := opts.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("seqby engine options: %w", err)
	}
	if _, ring := c.(*redis.Ring); ring {
		return nil, fmt.Errorf("seqby engine: a *redis.Ring splits a partition's keys from the keys its calls share with other partitions; use a *redis.Client, a failover client or a *redis.ClusterClient: %w", ErrUnsupportedClient)
	}
	if o.StateStore == nil {
		o.StateStore = NewRedisStateStore(c)
	}
	e := &Engine{
		reg: NewRegistry("redis", StreamPartitioning|ConsumerGroups),
		c:   c, o: o, incarnation: membership.NewIncarnation(o.OwnerID),
		log: o.Logger.With("owner", o.OwnerID),
	}
	if err := e.build(o); err != nil {
		return nil, fmt.Errorf("seqby engine metrics: %w", err)
	}
	return e, nil
}

// Name is "redis".
func (e *Engine) Name() string { return "redis" }

// Capabilities advertises StreamPartitioning and ConsumerGroups.
func (e *Engine) Capabilities() Capabilities { return StreamPartitioning | ConsumerGroups }

// Register validates and adds handlers (see Registry.Add). A sequential
// process manager gets one owner per correlation value; one that is not
// sequential shares plain consumer groups like an unkeyed handler, and its
// state saves are optimistic (reload and re-run on a version conflict).
func (e *Engine) Register(regs ...Registration) error {
	// Held throughout: Run, which sets running under it, then finds the
	// registry and the executor agreeing on every handler.
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.life.running {
		return fmt.Errorf("%w: %w", ErrRegistration, ErrRunning)
	}
	if err := e.reg.Add(regs...); err != nil {
		return err
	}
	for _, reg := range regs {
		e.exec.Add(handlerOf(reg, e.o.Codec))
	}
	return nil
}

// OwnerID is this instance's owner id (Options.OwnerID, or the one
// generated for it), as it appears in lease tokens and logs.
func (e *Engine) OwnerID() string { return e.o.OwnerID }

// Status returns a snapshot of the owned partitions and halts.
func (e *Engine) Status() Status {
	e.mu.Lock()
	s := Status{OwnerID: e.o.OwnerID, Running: e.life.running, Consuming: e.life.consuming}
	e.mu.Unlock()
	s.Halts, s.Faults, s.LargeCategories = haltsOf(e.unkeyed.Halts()), e.faultList(), e.disc.Large()
	for _, w := range e.workers.Status() {
		s.Partitions = append(s.Partitions, partitionStatus(w))
	}
	s.PausedHandlers = e.pauses.Handlers()
	sort.Strings(s.PausedHandlers)
	sort.Slice(s.Partitions, func(i, j int) bool {
		a, b := s.Partitions[i], s.Partitions[j]
		if a.Handler != b.Handler {
			return a.Handler < b.Handler
		}
		return a.Stream < b.Stream
	})
	return s
}

// alert calls OnHalt.
func (e *Engine) alert(h Halt) {
	if e.o.OnHalt != nil {
		e.callback("OnHalt", func() { e.o.OnHalt(h) })
	}
}

// callback runs a user callback, whose panic must not crash us.
func (e *Engine) callback(name string, f func()) {
	defer func() {
		if p := recover(); p != nil {
			e.log.Error("seqby: "+name+" panicked", "panic", p)
		}
	}()
	f()
}

// Registrations returns what was registered, in order.
func (e *Engine) Registrations() []Registration { return e.reg.Registrations() }

// partitionStatus converts a worker's status for Status.
func partitionStatus(w worker.Status) PartitionStatus {
	ps := PartitionStatus{Handler: w.Handler, Category: w.Category, Key: w.Key, Stream: w.Stream, Token: w.Token,
		Generation: w.Generation, Halted: w.Halted, Paused: w.Paused}
	if w.Halt != nil {
		h := Halt(*w.Halt)
		ps.Halt = &h
	}
	return ps
}
