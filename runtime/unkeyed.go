package runtime

import (
	"context"

	"github.com/seqby/seqby/runtime/internal/contract"
	"github.com/seqby/seqby/runtime/internal/discovery"
	"github.com/seqby/seqby/runtime/internal/unkeyed"
	"github.com/seqby/seqby/runtime/internal/worker"
)

// newUnkeyed builds the runner of the unkeyed handlers from o (already
// defaulted), after the executor, the waiter and the barrier it shares
// with the partitions. Retention, the index and the key rules stay e's.
func (e *Engine) newUnkeyed(o Options, index *discovery.Index) *unkeyed.Runner {
	return unkeyed.New(unkeyed.Config{Client: e.c, Owner: o.OwnerID, Exec: e.exec, Wake: e.wake, Replicas: e.replicas, Log: e.log,
		LeaseTTL: o.LeaseTTL, MemberTTL: e.members.MemberTTL(), HeartbeatInterval: o.HeartbeatInterval,
		DiscoveryInterval: o.DiscoveryInterval, BlockTimeout: o.BlockTimeout, RetryBackoff: o.RetryBackoff,
		MaxBackoff: o.MaxBackoff, IdleRecheck: worker.IdleRecheck, BackfillSuffix: o.BackfillSuffix,
		Partitions: index.Partitions, KeyRule: checkKeySuffix, Settled: e.countSettled,
		Trims: func(handler string, cats, lanes []string) unkeyed.Trimmer {
			return &laneTrims{e: e, handler: handler, cats: cats, lanes: lanes}
		},
		OnHalt: func(h contract.Halt) { e.alert(Halt(h)) }})
}

// laneTrims is one unkeyed worker's retention: it trims every
// worker.TrimEvery acks, or once its lanes are drained.
type laneTrims struct {
	e           *Engine
	handler     string
	cats, lanes []string
	t           worker.Trims
}

// Acked counts one ack.
func (l *laneTrims) Acked() { l.t.Acked() }

// TrimIf trims the lanes when due.
func (l *laneTrims) TrimIf(ctx context.Context, drained bool) {
	if l.t.Due(drained, worker.TrimEvery) {
		l.e.trim(ctx, l.handler, &l.t, l.cats, l.lanes)
	}
}

// haltsOf converts the unkeyed halts for Status; none is nil, as before.
func haltsOf(hs []contract.Halt) []Halt {
	if len(hs) == 0 {
		return nil
	}
	out := make([]Halt, len(hs))
	for i, h := range hs {
		out[i] = Halt(h)
	}
	return out
}
