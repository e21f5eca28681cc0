package runtime

import (
	"github.com/seqby/seqby/runtime/internal/contract"
	"github.com/seqby/seqby/runtime/internal/discovery"
	"github.com/seqby/seqby/runtime/internal/lease"
	"github.com/seqby/seqby/runtime/internal/rdb"
	"github.com/seqby/seqby/runtime/internal/worker"
)

// newLeases builds the partitions' leases from o (already defaulted),
// after the executor (its slots), the barrier, the waiter and the
// handler pauses they use; batch carries their confirmations.
func (e *Engine) newLeases(o Options, batch *rdb.Batcher) *lease.Leases {
	return lease.New(lease.Config{Client: e.c, Batch: batch, Wake: e.wake, Replicas: e.replicas, Telemetry: e.telemetry,
		Slots: e.exec.Slots(), Log: e.log, Incarnation: e.incarnation,
		LeaseTTL: o.LeaseTTL, LeaseMargin: o.LeaseMargin, HeartbeatInterval: o.HeartbeatInterval, VerifyBound: o.VerifyBound,
		RetryBackoff: o.RetryBackoff, MaxBackoff: o.MaxBackoff, ReplicaAcks: o.ReplicaAcks, ReplicaTimeout: o.ReplicaTimeout,
		Paused: e.pauses.Paused})
}

// newWorkers builds the owned set and its workers' Config from o
// (already defaulted), after the leases and everything they use; batch
// carries the workers' fenced reads and acks. Retention and OnHalt stay
// e's.
func (e *Engine) newWorkers(o Options, batch *rdb.Batcher) *worker.Set {
	return worker.New(worker.Config{Client: e.c, Batch: batch, Wake: e.wake, Exec: e.exec, Leases: e.leases,
		Replicas: e.replicas, Telemetry: e.telemetry, Members: e.members, Log: e.log,
		Paused: e.pauses.Paused, Trim: e.trim, Settled: e.countSettled,
		Alert: func(h contract.Halt) { e.alert(Halt(h)) },
		Options: worker.Options{Owner: o.OwnerID, LeaseTTL: o.LeaseTTL, HeartbeatInterval: o.HeartbeatInterval,
			RetryBackoff: o.RetryBackoff, MaxBackoff: o.MaxBackoff, VerifyBound: o.VerifyBound, ReapAfter: o.ReapAfter,
			HaltRealertInterval: o.HaltRealertInterval, ReadAhead: o.ReadAhead, BackfillSuffix: o.BackfillSuffix,
			ReplicaAcks: o.ReplicaAcks, PermanentErrors: PermanentRedisErrors, FaultBench: FaultBench}})
}

// newDiscovery builds the discovery of the keyed handlers' partitions
// from o (already defaulted), last: it starts workers in the owned set,
// adopts through the leases, and reports to the instance record and the
// unowned check. The key rules stay e's.
func (e *Engine) newDiscovery(o Options, index *discovery.Index) *discovery.Discovery {
	return discovery.New(discovery.Config{Client: e.c, Owner: o.OwnerID, Incarnation: e.incarnation,
		LeaseTTL: o.LeaseTTL, DiscoveryInterval: o.DiscoveryInterval, ReapAfter: o.ReapAfter,
		PartitionWarnThreshold: o.PartitionWarnThreshold, BackfillSuffix: o.BackfillSuffix, Log: e.log,
		Index: index, Wake: e.wake, Workers: e.workers, Leases: e.leases, Pauses: e.pauses, Members: e.members,
		Telemetry: e.telemetry, KeyRule: checkKeySuffix, Unowned: e.maint.CheckUnowned})
}
