package runtime

import (
	"context"

	"github.com/seqby/seqby/runtime/internal/rdb"
)

// An operator resolves a halted head (seqbyctl skip or dlq move) by acking
// it and deleting the halted owner's lease in one script, which leaves a
// note next to the lease (rdb.ResolvedKey). For the halted owner that is
// the expected end of its partition, not an incident: it logs it at info
// level with the operator's audit entry and counts it in
// seqby.partitions.resolved, while seqby.lease.lost counts real losses
// only.

// auditScan is how many of the newest audit entries are searched for the
// one of a resolve.
const auditScan = 100

// reportLossOrResolution reports a halted partition's deferred loss (lost)
// as finish ends it: a resolution when the operator's note names this
// lease's token and its halted head, else a loss.
func (p *partition) reportLossOrResolution() {
	cause := p.held.TakeLossCause()
	if cause == nil {
		return
	}
	e := p.e
	ctx, cancel := context.WithTimeout(context.WithoutCancel(p.held.Context()), e.o.HeartbeatInterval)
	defer cancel()
	res, found, err := rdb.Resolved(ctx, e.c, p.held.Lease().Ref.Key)
	if err != nil || !found || res.Token != p.held.Lease().Token() || p.head == nil || res.EntryID != p.head.ID {
		p.held.ReportLoss(cause)
		return
	}
	e.telemetry.PartitionResolved(p.reg.Name)
	who, command := "", res.Command
	if es, err := rdb.AuditLog(ctx, e.c, auditScan); err == nil {
		for _, a := range es {
			if a.Fields["entry_id"] == res.EntryID && a.Fields["handler"] == p.reg.Name {
				who, command = a.Fields["who"], a.Fields["command"]
				break
			}
		}
	}
	e.log.Info("seqby: halt resolved by operator; this instance leaves the partition and its next owner continues after the head",
		"handler", p.reg.Name, "stream", p.lanes[0], "entry", res.EntryID, "command", command, "who", who, "token", p.held.Lease().Token())
}
