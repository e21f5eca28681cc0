package runtime

import (
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

// The engine is a composition root: each of its components takes a
// Config of values and callbacks, built here from the engine's Options.
// What a component asks of another it gets as a pointer, so build goes
// in the order of those needs; what it asks of the engine (OnHalt,
// OnFault, retention, the key rules) stays e's, behind callbacks.

// build builds e's components from o (already defaulted).
func (e *Engine) build(o Options) error {
	var err error
	if e.telemetry, err = e.newTelemetry(o); err != nil {
		return err
	}
	e.members = e.newMembers(o)
	e.exec = e.newExecutor(o)
	e.replicas = replicas.New(replicas.Config{Client: e.c, Acks: o.ReplicaAcks, Timeout: o.ReplicaTimeout, Backoff: o.Retry.RetryBackoff,
		Log: o.Logger.With("owner", o.OwnerID), OnShort: e.telemetry.ReplicaShort})
	// The index is the discovery's, but the waiter, the reaper and the
	// unkeyed fans, built before it, read or invalidate it too.
	index := discovery.NewIndex(e.c, 2*o.LeaseTTL)
	e.wake = wake.New(wake.Config{Client: e.c, Block: o.BlockTimeout, OnSignal: index.Signalled, OnGap: index.Invalidate})
	e.pauses = lease.NewPauses(lease.PausesConfig{Client: e.c, Log: e.log, DiscoveryInterval: o.DiscoveryInterval})
	// One Batcher carries the workers' fenced reads and acks and their
	// gates' confirmations, in shared rounds.
	batch := rdb.NewBatcher(e.c)
	e.leases = e.newLeases(o, batch)
	e.workers = e.newWorkers(o, batch)
	e.beat.renewer = lease.NewRenewer(e.leases, lease.RenewerConfig{List: e.workers.Helds, PermanentErrors: PermanentRedisErrors})
	e.unkeyed = e.newUnkeyed(o, index)
	e.maint = e.newMaintenance(o, index)
	e.disc = e.newDiscovery(o, index)
	return nil
}

// newTelemetry builds the engine's metrics and tracing from o; the gauges
// read e's state at each collection, through snapshot.
func (e *Engine) newTelemetry(o Options) (*telemetry.Telemetry, error) {
	return telemetry.New(telemetry.Config{
		MeterProvider: o.MeterProvider, TracerProvider: o.TracerProvider, Propagator: o.Propagator,
		Client: e.c, Log: e.log,
		Snapshot: e.snapshot,
	})
}

// newMembers builds the instance record from o; the owned set and
// OnFault stay e's.
func (e *Engine) newMembers(o Options) *membership.Instance {
	return membership.New(membership.Config{Client: e.c, Owner: o.OwnerID, Incarnation: e.incarnation,
		LeaseTTL: o.LeaseTTL, HeartbeatInterval: o.HeartbeatInterval, DiscoveryInterval: o.DiscoveryInterval,
		Log: e.log, Owned: func(hs []string) []int { return e.workers.Owned(hs) }, OnFault: func(f membership.Fault) { e.alertFault(faultOf(f)) }})
}

// newExecutor builds the engine's executor from o, after the instance
// record it asks which other builds route a type. Its handlers come in
// through Register and its groups' starts at Run.
func (e *Engine) newExecutor(o Options) *executor.Executor {
	cfg := executor.Config{Log: e.log, Telemetry: e.telemetry, Owner: o.OwnerID, Timeout: o.HandlerTimeout,
		Retry:         executor.RetryPolicy(o.Retry),
		MaxDeliveries: o.MaxDeliveries, Concurrency: o.Concurrency,
		KnownType: e.reg.KnownType, OtherBuilds: e.members.BuildsRouting, States: o.StateStore}
	if al, ok := o.StateStore.(appliedLoader); ok {
		cfg.LoadApplied = al.loadApplied
	}
	return executor.New(cfg)
}

// newLeases builds the partitions' leases from o, after the executor
// (its slots), the barrier, the waiter and the handler pauses they use;
// batch carries their confirmations.
func (e *Engine) newLeases(o Options, batch *rdb.Batcher) *lease.Leases {
	return lease.New(lease.Config{Client: e.c, Batch: batch, Wake: e.wake, Replicas: e.replicas, Telemetry: e.telemetry,
		Slots: e.exec.Slots(), Log: e.log, Incarnation: e.incarnation,
		LeaseTTL: o.LeaseTTL, LeaseMargin: o.LeaseMargin, HeartbeatInterval: o.HeartbeatInterval, VerifyBound: o.VerifyBound,
		RetryBackoff: o.Retry.RetryBackoff, MaxBackoff: o.Retry.MaxBackoff, ReplicaAcks: o.ReplicaAcks, ReplicaTimeout: o.ReplicaTimeout,
		Paused: e.pauses.Paused})
}

// newWorkers builds the owned set and its workers' Config from o, after
// the leases and everything they use; batch carries the workers' fenced
// reads and acks. Retention and OnHalt stay e's.
func (e *Engine) newWorkers(o Options, batch *rdb.Batcher) *worker.Set {
	return worker.New(worker.Config{Client: e.c, Batch: batch, Wake: e.wake, Exec: e.exec, Leases: e.leases,
		Replicas: e.replicas, Telemetry: e.telemetry, Members: e.members, Log: e.log,
		Paused: e.pauses.Paused, Trim: e.trim,
		Alert: func(h contract.Halt) { e.alert(Halt(h)) },
		Options: worker.Options{Owner: o.OwnerID, LeaseTTL: o.LeaseTTL, HeartbeatInterval: o.HeartbeatInterval,
			RetryBackoff: o.Retry.RetryBackoff, MaxBackoff: o.Retry.MaxBackoff, VerifyBound: o.VerifyBound, ReapAfter: o.ReapAfter,
			HaltRealertInterval: o.HaltRealertInterval, ReadAhead: o.ReadAhead, BackfillSuffix: o.BackfillSuffix,
			ReplicaAcks: o.ReplicaAcks, PermanentErrors: PermanentRedisErrors, FaultBench: FaultBench}})
}

// newUnkeyed builds the runner of the unkeyed handlers from o, after the
// executor, the waiter and the barrier it shares with the partitions; the
// fans list partitions from index. Retention and the key rules stay e's.
func (e *Engine) newUnkeyed(o Options, index *discovery.Index) *unkeyed.Runner {
	return unkeyed.New(unkeyed.Config{Client: e.c, Owner: o.OwnerID, Exec: e.exec, Wake: e.wake, Replicas: e.replicas, Log: e.log,
		LeaseTTL: o.LeaseTTL, MemberTTL: e.members.MemberTTL(), HeartbeatInterval: o.HeartbeatInterval,
		DiscoveryInterval: o.DiscoveryInterval, BlockTimeout: o.BlockTimeout, RetryBackoff: o.Retry.RetryBackoff,
		MaxBackoff: o.Retry.MaxBackoff, IdleRecheck: worker.IdleRecheck, BackfillSuffix: o.BackfillSuffix,
		Partitions: index.Partitions, KeyRule: checkKeySuffix,
		Trims: func(handler string, cats, lanes []string) unkeyed.Trimmer {
			return &laneTrims{e: e, handler: handler, cats: cats, lanes: lanes}
		},
		OnHalt: func(h contract.Halt) { e.alert(Halt(h)) }})
}

// newMaintenance builds the engine's maintenance (reaping, retention, the
// unowned check) from o, after the instance record and the barrier it
// reports to; a pass that reaped invalidates index. The owned set stays
// e's.
func (e *Engine) newMaintenance(o Options, index *discovery.Index) *maintenance.Maintenance {
	return maintenance.New(maintenance.Config{Client: e.c, Owner: o.OwnerID, Incarnation: e.incarnation,
		LeaseTTL: o.LeaseTTL, DiscoveryInterval: o.DiscoveryInterval, ReapAfter: o.ReapAfter,
		BackfillSuffix: o.BackfillSuffix, MemberTTL: e.members.MemberTTL(), Log: e.log, Replicas: e.replicas,
		Adopt: e.leases.Adopt, Invalidate: index.Invalidate, Owned: e.workers.OwnedUnits,
		Report: func(id string, f membership.Fault) {
			e.members.AddFault(id, f)
			e.alertFault(faultOf(f))
		},
		Clear: func(id string) { e.members.RemoveFault(membership.FaultUnowned, id) }})
}

// newDiscovery builds the discovery of the keyed handlers' partitions
// from o, last: it starts workers in the owned set, adopts through the
// leases, and reports to the instance record and the unowned check. The
// key rules stay e's.
func (e *Engine) newDiscovery(o Options, index *discovery.Index) *discovery.Discovery {
	return discovery.New(discovery.Config{Client: e.c, Owner: o.OwnerID, Incarnation: e.incarnation,
		LeaseTTL: o.LeaseTTL, DiscoveryInterval: o.DiscoveryInterval, ReapAfter: o.ReapAfter,
		PartitionWarnThreshold: o.PartitionWarnThreshold, BackfillSuffix: o.BackfillSuffix, Log: e.log,
		Index: index, Wake: e.wake, Workers: e.workers, Leases: e.leases, Pauses: e.pauses, Members: e.members,
		Telemetry: e.telemetry, KeyRule: checkKeySuffix, Unowned: e.maint.CheckUnowned})
}
