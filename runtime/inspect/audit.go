package inspect

import (
	"context"
	"time"

	"github.com/seqby/seqby/runtime/internal/rdb"
)

// Audit appends e to the audit stream seqby:__audit__ (capped at about
// 10,000 entries, oldest dropped first) and returns it with its ID, and
// When set to now if it was zero. Record every action that changed
// something, after it did: seqbyctl does, for skip, dlq move, dlq replay
// and dlq drop.
//
// e.Op names the action (a random one when it is ""): Audit appends one
// entry per Op within 10 minutes, so an append whose reply was lost and
// that Redis ran twice (resent by go-redis or a proxy) is recorded once,
// and Audit called again with the returned entry's Op returns that entry.
func (i *Inspector) Audit(ctx context.Context, e AuditEntry) (AuditEntry, error) {
	if e.When.IsZero() {
		e.When = time.Now()
	}
	e.When = e.When.UTC()
	if e.Op == "" {
		e.Op = rdb.NewOp()
	}
	id, err := rdb.AppendAudit(ctx, i.c, e.Op, []any{
		"who", e.Who, "when", e.When.Format(time.RFC3339), "command", e.Command, "handler", e.Handler,
		"partition", e.Partition, "stream", e.Stream, "entry_id", e.EntryID, "result", e.Result,
	})
	e.ID = id
	return e, err
}

// AuditLog returns the newest n entries of the audit stream, newest
// first.
func (i *Inspector) AuditLog(ctx context.Context, n int) ([]AuditEntry, error) {
	es, err := rdb.AuditLog(ctx, i.c, int64(n))
	if err != nil {
		return nil, err
	}
	out := make([]AuditEntry, len(es))
	for j, e := range es {
		f := e.Fields
		when, _ := time.Parse(time.RFC3339, f["when"])
		out[j] = AuditEntry{ID: e.ID, Who: f["who"], When: when, Command: f["command"], Handler: f["handler"],
			Partition: f["partition"], Stream: f["stream"], EntryID: f["entry_id"], Result: f["result"], Op: f["op"]}
	}
	return out, nil
}
