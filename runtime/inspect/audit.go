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
func (i *Inspector) Audit(ctx context.Context, e AuditEntry) (AuditEntry, error) {
	if e.When.IsZero() {
		e.When = time.Now()
	}
	e.When = e.When.UTC()
	id, err := rdb.AppendAudit(ctx, i.c, []any{
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
			Partition: f["partition"], Stream: f["stream"], EntryID: f["entry_id"], Result: f["result"]}
	}
	return out, nil
}
