package outbox

import (
	"context"
	"fmt"
)

// cleanupBatch bounds one DELETE of the cleanup.
const cleanupBatch = 1000

// cleanup deletes PUBLISHED records older than Retention, in batches, and
// returns how many it deleted. Only the active relay runs it. On
// PostgreSQL each batch picks its rows FOR UPDATE SKIP LOCKED, so it never
// waits behind (or blocks) an operator's or another tool's transaction on
// those rows; pending records are never touched.
func (r *Relay) cleanup(ctx context.Context) (int64, error) {
	lock := ""
	if r.d.skipLocked() {
		lock = " FOR UPDATE SKIP LOCKED"
	}
	cutoff := r.d.fromMS("(" + r.d.nowMS() + " - ?)")
	q := r.d.rebind(`DELETE FROM ` + r.table + ` WHERE seq IN (SELECT seq FROM ` + r.table +
		` WHERE status = 'PUBLISHED' AND published_at < ` + cutoff + ` ORDER BY seq LIMIT ?` + lock + `)`)
	var total int64
	for ctx.Err() == nil {
		res, err := r.db.ExecContext(ctx, q, r.opts.Retention.Milliseconds(), cleanupBatch)
		if err != nil {
			return total, fmt.Errorf("outbox: delete published records older than %s: %w", r.opts.Retention, err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return total, fmt.Errorf("outbox: delete published records older than %s: rows affected: %w", r.opts.Retention, err)
		}
		total += n
		if n < cleanupBatch {
			break
		}
	}
	if total > 0 {
		r.log.Info("outbox: deleted published records past retention", "relay", r.opts.Name, "deleted", total, "retention", r.opts.Retention.String())
	}
	return total, nil
}

// Cleanup deletes PUBLISHED records older than RelayOptions.Retention now,
// as the active relay does every CleanupInterval, and returns how many it
// deleted. It needs no lease: deleting published records is safe from
// any process. Bad options fail as they do in Run.
func (r *Relay) Cleanup(ctx context.Context) (int64, error) {
	if err := r.check(); err != nil {
		return 0, err
	}
	if r.opts.Retention < 0 {
		return 0, nil
	}
	n, err := r.cleanup(ctx)
	return n, missing(r.table, err)
}
