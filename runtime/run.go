package runtime

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/seqby/seqby/runtime/internal/discovery"
	"github.com/seqby/seqby/runtime/internal/executor"
	"github.com/seqby/seqby/runtime/internal/rdb"
	"github.com/seqby/seqby/runtime/internal/replicas"
	"github.com/seqby/seqby/runtime/internal/wake"
)

// Run consumes until ctx is done, then shuts down gracefully: each owned
// partition finishes its in-flight message, acks it and releases its lease,
// and the instance leaves the member sets, so others take over at once.
// It returns nil after a graceful stop, or an error if it cannot start.
func (e *Engine) Run(ctx context.Context) error {
	e.mu.Lock()
	if e.life.running {
		e.mu.Unlock()
		return ErrRunning
	}
	e.life.running = true
	// Faults, failures, unowned and held marks are per Run: a second Run
	// neither reports the first one's nor skips what it failed on.
	e.members.Reset()
	e.maint.Reset()
	e.disc.Reset()
	e.life.startedAt = time.Now()
	e.mu.Unlock()
	defer func() { e.mu.Lock(); e.life.running, e.life.consuming = false, false; e.mu.Unlock() }()
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
	signals := wake.NewKeeper(wake.KeeperConfig{Client: e.c, Waiter: e.wake, Incarnation: e.incarnation, Log: e.log,
		Interval: e.o.HeartbeatInterval, LeaseTTL: e.o.LeaseTTL, Fanout: fanoutCategories(cs)})
	signals.Keep(ctx, true) // before any worker reads: publishers find the stream, and signal a fan's category
	// Handlers and the loops that own partitions outlive ctx long enough to
	// finish the in-flight message; stop tells them to wind down.
	base := executor.WithClient(context.WithoutCancel(ctx), e.c)
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
	e.mu.Lock() // the gauges' snapshot and Health read them
	for _, c := range leased {
		if !slices.Contains(e.life.handlers, c.reg.Name) {
			e.life.handlers = append(e.life.handlers, c.reg.Name)
		}
	}
	handlers := slices.Clone(e.life.handlers)
	e.mu.Unlock()
	var partsWG sync.WaitGroup
	hbCtx, stopHeartbeat := context.WithCancel(base)
	wg.Add(1)
	go func() { defer wg.Done(); e.heartbeatLoop(hbCtx, signals, handlers) }()
	if cats := partitionedCategories(cs); e.reaping() && len(cats) > 0 {
		wg.Add(1)
		go func() { defer wg.Done(); e.maint.Run(base, stop, cats) }()
	}
	e.mu.Lock()
	e.life.consuming = true
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

// heartbeatLoop renews every owned lease each HeartbeatInterval in one
// pipeline, from its own goroutine, so renewals never wait behind a
// handler. A renew that finds the lease gone cancels the partition at once;
// one that fails on the network leaves the deadline timer to cancel it.
// It also renews the OwnerID's key, keeps signals (this incarnation's
// signal stream and the fanout markers), announces handlers and reports
// the faults. The first beat is one HeartbeatInterval after Run starts
// (Run has just claimed the OwnerID): Health leaves last_renew out until
// then. A beat at Run's start was tried and undone: it announced a
// quickly stopped instance after LeaveMembers had taken it out, which
// kept it counted as live (and its deploy record) for LeaseTTL.
func (e *Engine) heartbeatLoop(ctx context.Context, signals *wake.Keeper, handlers []string) {
	t := time.NewTicker(e.o.HeartbeatInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		storeTime(&e.beat.at, time.Now())
		e.beat.renewer.Renew(ctx)
		e.members.RenewOwner(ctx)
		signals.Keep(ctx, false)
		e.members.Announce(ctx, handlers)
		e.members.ReportFaults(ctx)
	}
}

// consumer is one handler on one category, consumed in one of four ways.
type consumer struct {
	reg      Registration
	category string
	mode     consumeMode
}

// consumeMode is how a consumer reads its category.
type consumeMode int

const (
	modeLeased consumeMode = iota // keyed handler: one owner per partition
	modeFan                       // unkeyed handler on a partitioned category
	modePlain                     // unpartitioned category: one consumer group
	modePM                        // sequential pm: one owner per correlation value
)

// consumers lists a consumer per registration and category it reads,
// in registration order.
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
