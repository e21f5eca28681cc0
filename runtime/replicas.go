package runtime

import (
	"context"
	"errors"
	"time"

	"github.com/seqby/seqby/runtime/internal/replicas"
)

// awaitReplicas holds p's next attempt until its writes so far are on
// Options.ReplicaAcks replicas (a no-op in the default mode). A change of
// primary in between ends the partition (lost): it is claimed afresh.
// Only the partition's own goroutine calls it.
func (p *partition) awaitReplicas(ctx context.Context) error {
	b := p.e.replicas
	if b == nil {
		return nil
	}
	left := func() time.Duration { return time.Until(p.releasedAt().Add(p.e.releaseGrace())) }
	at, err := b.Await(ctx, b.SlotOf(p.held.Lease().Ref.Key), p.held.DurableAt, time.Now(), p.release, left)
	if errors.Is(err, replicas.ErrPrimaryChanged) {
		p.held.Lost(err)
		return err
	}
	if errors.Is(err, replicas.ErrGaveUp) {
		p.e.log.Warn("seqby: handing over without confirming the partition's last writes on replicas; the entry in hand, if any, runs again at the next owner",
			"handler", p.reg.Name, "stream", p.lanes[0], "replica_acks", p.e.o.ReplicaAcks)
		return err
	}
	if err != nil {
		return err
	}
	p.held.DurableAt = at
	return nil
}
