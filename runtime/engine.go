package runtime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seqby/seqby/runtime/internal/contract"
	"github.com/seqby/seqby/runtime/internal/discovery"
	"github.com/seqby/seqby/runtime/internal/executor"
	"github.com/seqby/seqby/runtime/internal/lease"
	"github.com/seqby/seqby/runtime/internal/maintenance"
	"github.com/seqby/seqby/runtime/internal/membership"
	"github.com/seqby/seqby/runtime/internal/rdb"
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
	// exec runs the handlers on entries (package executor), and holds
	// the concurrency slots every attempt takes.
	exec *executor.Executor
	wake *wake.Waiter
	// signals keeps this incarnation's signal stream and the fanout
	// markers; set by Run, then the heartbeat's.
	signals *wake.Keeper
	// telemetry records the engine's metrics and attempt spans (package
	// telemetry); no-ops unless Options gave providers.
	telemetry *telemetry.Telemetry

	// leases holds the partitions' leases and their gates' shared state
	// (package lease); renewer renews them each heartbeat.
	leases  *lease.Leases
	renewer *lease.Renewer
	// workers are the owned partitions, each run by its worker (package
	// worker), with their own lock.
	workers *worker.Set
	// pauses are the whole-handler pauses discovery found.
	pauses *lease.Pauses

	mu      sync.Mutex
	running bool
	// consuming: Run finished starting (Status.Consuming).
	consuming bool
	handlers  []string // keyed handlers, announced as members
	// members is this instance's record among the others: its OwnerID
	// key, announcements, health strikes, faults and deploy records
	// (package membership), with its own lock.
	members *membership.Instance
	// maint reaps cold partitions, trims acked entries and checks for
	// unowned partitions (package maintenance), with its own lock.
	maint *maintenance.Maintenance
	// disc claims and hands over the keyed handlers' partitions each
	// discovery cycle, and keeps the indexes and its memos between
	// cycles (package discovery), with its own lock.
	disc *discovery.Discovery

	// unkeyed runs the unkeyed handlers' workers, and keeps their member
	// announcers and halts behind its own locks (package unkeyed).
	unkeyed *unkeyed.Runner

	// Health: when Run started (under mu), and, as Unix nanoseconds,
	// when the heartbeat last ticked.
	startedAt time.Time
	beatAt    atomic.Int64

	// replicas confirms writes on replicas in the strict mode
	// (Options.ReplicaAcks; nil otherwise).
	replicas *replicas.Barrier
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
	// The index is the discovery's, but the waiter, the reaper and the
	// unkeyed fans, built before it, read or invalidate it too.
	index := discovery.NewIndex(c, 2*o.LeaseTTL)
	if e.telemetry, err = e.newTelemetry(o); err != nil {
		return nil, fmt.Errorf("seqby engine metrics: %w", err)
	}
	e.members = membership.New(membership.Config{Client: c, Owner: o.OwnerID, Incarnation: e.incarnation,
		LeaseTTL: o.LeaseTTL, HeartbeatInterval: o.HeartbeatInterval, DiscoveryInterval: o.DiscoveryInterval,
		Log: e.log, Owned: func(hs []string) []int { return e.workers.Owned(hs) }, OnFault: func(f membership.Fault) { e.alertFault(faultOf(f)) }})
	e.exec = e.newExecutor(o)
	e.replicas = replicas.New(replicas.Config{Client: c, Acks: o.ReplicaAcks, Timeout: o.ReplicaTimeout, Backoff: o.RetryBackoff,
		Log: o.Logger.With("owner", o.OwnerID), OnShort: e.telemetry.ReplicaShort})
	e.wake = wake.New(wake.Config{Client: c, Block: o.BlockTimeout, OnSignal: index.Signalled, OnGap: index.Invalidate})
	e.pauses = lease.NewPauses(lease.PausesConfig{Client: c, Log: e.log, DiscoveryInterval: o.DiscoveryInterval})
	// One Batcher carries the workers' fenced reads and acks and their
	// gates' confirmations, in shared rounds.
	batch := rdb.NewBatcher(c)
	e.leases = e.newLeases(o, batch)
	e.workers = e.newWorkers(o, batch)
	e.renewer = lease.NewRenewer(e.leases, lease.RenewerConfig{List: e.workers.Helds, PermanentErrors: PermanentRedisErrors})
	e.unkeyed = e.newUnkeyed(o, index)
	e.maint = e.newMaintenance(o, index)
	e.disc = e.newDiscovery(o, index)
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
	if e.running {
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

// consumer is one handler on one category, consumed in one of three ways.
type consumer struct {
	reg      Registration
	category string
	mode     consumeMode
}

type consumeMode int

const (
	modeLeased consumeMode = iota // keyed handler: one owner per partition
	modeFan                       // unkeyed handler on a partitioned category
	modePlain                     // unpartitioned category: one consumer group
	modePM                        // sequential pm: one owner per correlation value
)

func (e *Engine) consumers() []consumer {
	partitioned := e.reg.PartitionedCategories()
	var out []consumer
	for _, reg := range e.reg.Registrations() {
		keyed := reg.Key != "" || reg.Sequential
		for _, cat := range categories(reg) {
			mode := modePlain
			if _, ok := partitioned[cat]; ok {
				mode = modeFan
				if keyed {
					mode = modeLeased
				}
			}
			if reg.Kind == ProcessManager && reg.Sequential {
				// Registration checks made every category of a
				// sequential pm partitioned by its correlate field.
				mode = modePM
			}
			out = append(out, consumer{reg: reg, category: cat, mode: mode})
		}
	}
	return out
}

// partitionedCategories lists the partitioned categories cs read, once
// each.
func partitionedCategories(cs []consumer) []string {
	var cats []string
	for _, c := range cs {
		if c.mode != modePlain && !slices.Contains(cats, c.category) {
			cats = append(cats, c.category)
		}
	}
	return cats
}

// fanoutCategories lists, once each, the partitioned categories of cs that
// an unkeyed handler reads: the Keeper keeps their fanout markers.
func fanoutCategories(cs []consumer) []string {
	var out []string
	for _, c := range cs {
		if c.mode == modeFan && !slices.Contains(out, c.category) {
			out = append(out, c.category)
		}
	}
	return out
}

// Run consumes until ctx is done, then shuts down gracefully: each owned
// partition finishes its in-flight message, acks it and releases its lease,
// and the instance leaves the member sets, so others take over at once.
// It returns nil after a graceful stop, or an error if it cannot start.
func (e *Engine) Run(ctx context.Context) error {
	e.mu.Lock()
	if e.running {
		e.mu.Unlock()
		return ErrRunning
	}
	e.running = true
	// Faults, failures and unowned marks are per Run: a second Run
	// neither reports the first one's nor skips what it failed on.
	e.members.Reset()
	e.maint.Reset()
	e.disc.Reset()
	e.startedAt = time.Now()
	e.mu.Unlock()
	defer func() { e.mu.Lock(); e.running, e.consuming = false, false; e.mu.Unlock() }()
	defer e.pauses.End()
	observing, err := e.telemetry.Observe()
	if err != nil {
		return fmt.Errorf("seqby engine: register the metrics callback: %w", err)
	}
	defer observing.Unregister()

	if err := rdb.LoadScripts(ctx, e.c); err != nil {
		if ctx.Err() != nil {
			return nil // stopped before it started: a graceful stop, nothing owned
		}
		return fmt.Errorf("seqby engine: load scripts (is Redis reachable?): %w", err)
	}
	if err := e.checkMemoryPolicy(ctx); err != nil {
		return err
	}
	if err := replicas.Check(ctx, e.replicas, replicas.CheckConfig{Client: e.c, Log: e.log, LeaseTTL: e.o.LeaseTTL, Quiet: e.o.SkipEvictionCheck}); err != nil {
		return err
	}
	if err := e.members.ClaimOwner(ctx); errors.Is(err, ErrOwnerInUse) {
		return fmt.Errorf("seqby engine: %w", err)
	} else if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		// Leases are per incarnation whatever happens here: a Redis that
		// refuses the claim only leaves a duplicate OwnerID undetected.
		e.log.Warn("seqby: claiming the OwnerID failed; another process with the same OwnerID would go undetected (the heartbeat tries again)", "err", err)
	}
	defer e.members.ReleaseOwner(ctx)
	cs := e.consumers()
	if len(cs) == 0 {
		return fmt.Errorf("seqby engine: nothing registered; call Register before Run")
	}
	starts, err := e.registerGroups(ctx, cs)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("seqby engine: %w", err)
	}
	e.exec.SetStarts(starts)
	for _, c := range cs {
		if c.mode != modePlain {
			if err := e.wake.Watch(ctx, c.category); err != nil {
				if ctx.Err() != nil {
					return nil // stopped while starting, as registerGroups above
				}
				return fmt.Errorf("seqby engine: watch %s: %w", c.category, err)
			}
		}
	}
	e.wake.WatchOwn(rdb.OwnerSignalKey(e.incarnation))
	e.signals = wake.NewKeeper(wake.KeeperConfig{Client: e.c, Waiter: e.wake, Incarnation: e.incarnation, Log: e.log,
		Interval: e.o.HeartbeatInterval, LeaseTTL: e.o.LeaseTTL, Fanout: fanoutCategories(cs)})
	e.signals.Keep(ctx, true) // before any worker reads: publishers find the stream, and signal a fan's category
	// Handlers and the loops that own partitions outlive ctx long enough to
	// finish the in-flight message; stop tells them to wind down.
	base := contract.WithClient(context.WithoutCancel(ctx), e.c)
	stop := ctx.Done()
	var wg sync.WaitGroup
	waitCtx, stopWaiter := context.WithCancel(base)
	wg.Add(1)
	go func() {
		defer wg.Done()
		e.wake.Run(waitCtx, func(err error) { e.log.Warn("seqby: waiting for new entries failed; retrying", "err", err) })
	}()
	var leased []consumer
	for _, c := range cs {
		switch c.mode {
		case modeLeased, modePM:
			leased = append(leased, c)
		case modePlain:
			wg.Add(1)
			go func() { defer wg.Done(); e.unkeyed.RunPlain(base, stop, c.reg.Name, c.category) }()
		}
	}
	e.mu.Lock() // the gauges' snapshot reads e.handlers
	for _, c := range leased {
		if !slices.Contains(e.handlers, c.reg.Name) {
			e.handlers = append(e.handlers, c.reg.Name)
		}
	}
	e.mu.Unlock()
	var partsWG sync.WaitGroup
	hbCtx, stopHeartbeat := context.WithCancel(base)
	wg.Add(1)
	go func() { defer wg.Done(); e.heartbeatLoop(hbCtx) }()
	if cats := partitionedCategories(cs); e.reaping() && len(cats) > 0 {
		wg.Add(1)
		go func() { defer wg.Done(); e.maint.Run(base, stop, cats) }()
	}
	e.mu.Lock()
	e.consuming = true
	e.mu.Unlock()
	e.log.Info("seqby engine running", "consumers", len(cs), "lease_ttl", e.o.LeaseTTL)
	fans := e.unkeyed.Fans()
	syncFans := func() {
		for _, c := range cs {
			if c.mode == modeFan {
				fans.Sync(base, stop, c.reg.Name, c.category, &partsWG)
			}
		}
	}
	e.disc.Run(base, stop, discoveryHandlers(leased), syncFans, &partsWG)

	// Graceful stop: leave the member sets first so the others' share
	// grows at once, then every partition finishes, acks and releases
	// (the heartbeat keeps renewing their leases meanwhile).
	e.members.LeaveMembers(base, leaseHandlers(leased))
	e.workers.ReleaseAll()
	partsWG.Wait()
	stopHeartbeat()
	stopWaiter()
	wg.Wait()
	if e.replicas != nil {
		// Last: the renewals' confirmations (ended with the heartbeat's
		// context) and the unkeyed workers' acks (wg) wait on barriers
		// too; once none waits, the loop ends after its barriers.
		e.replicas.Drain()
	}
	e.log.Info("seqby engine stopped")
	return nil
}

// discoveryHandlers groups leased by handler, in their order, into the
// handlers discovery balances.
func discoveryHandlers(leased []consumer) []discovery.Handler {
	var out []discovery.Handler
	at := map[string]int{}
	for _, c := range leased {
		i, ok := at[c.reg.Name]
		if !ok {
			i = len(out)
			at[c.reg.Name] = i
			out = append(out, discovery.Handler{Name: c.reg.Name, AckBatch: c.reg.AckBatch, PM: c.mode == modePM})
		}
		out[i].Categories = append(out[i].Categories, c.category)
	}
	return out
}

// reaping reports whether cold partitions are let go and reaped.
func (e *Engine) reaping() bool { return e.o.ReapAfter > 0 }

// Status returns a snapshot of the owned partitions and halts.
func (e *Engine) Status() Status {
	e.mu.Lock()
	defer e.mu.Unlock()
	s := Status{OwnerID: e.o.OwnerID, Running: e.running, Consuming: e.consuming, Halts: haltsOf(e.unkeyed.Halts()),
		Faults: e.faultList(), LargeCategories: e.disc.Large()}
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
