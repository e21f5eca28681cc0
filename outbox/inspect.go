package outbox

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"
)

// Queryer runs a query: *sql.DB, *sql.Tx and *sql.Conn all are.
type Queryer interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// AbandonedRecord is a record the relay could never publish.
type AbandonedRecord struct {
	Seq       int64  // the record's seq column: its insertion order
	MessageID string // the message's id, the idempotency key downstream
	Category  string // the category it was to be published to
	Key       string // its partition key ("" when the category is not partitioned)
	Type      string // its message type name (the type field of its stream entry)
	// Reason is the error that made the record unpublishable.
	Reason string
	// CreatedAt is when Add (or whoever) inserted it; AbandonedAt when
	// the relay marked it.
	CreatedAt   time.Time
	AbandonedAt time.Time
}

// Abandoned lists up to limit abandoned records (limit <= 0: 100), oldest
// first. The same list in SQL:
//
//	SELECT seq, message_id, category, partition_key, type, reason, created_at
//	FROM seqby_outbox WHERE status = 'ABANDONED' ORDER BY seq;
func (o *Outbox) Abandoned(ctx context.Context, db Queryer, limit int) ([]AbandonedRecord, error) {
	if o.err != nil {
		return nil, o.err
	}
	if limit <= 0 {
		limit = 100
	}
	d := o.opts.Dialect
	q := d.rebind(`SELECT seq, message_id, category, partition_key, type, reason, ` + d.ms("created_at") + `, ` + d.ms("published_at") +
		` FROM ` + o.opts.Table + ` WHERE status = 'ABANDONED' ORDER BY seq LIMIT ?`)
	rows, err := db.QueryContext(ctx, q, limit)
	if err != nil {
		return nil, fmt.Errorf("outbox: list abandoned records: %w", missing(o.opts.Table, err))
	}
	defer rows.Close()
	var out []AbandonedRecord
	for rows.Next() {
		var a AbandonedRecord
		var created int64
		var at sql.NullInt64
		if err := rows.Scan(&a.Seq, &a.MessageID, &a.Category, &a.Key, &a.Type, &a.Reason, &created, &at); err != nil {
			return nil, fmt.Errorf("outbox: list abandoned records: %w", err)
		}
		a.CreatedAt = time.UnixMilli(created)
		if at.Valid {
			a.AbandonedAt = time.UnixMilli(at.Int64)
		}
		out = append(out, a)
	}
	return out, rows.Err()
}

// DeleteAbandoned deletes the abandoned records of seqs (from Abandoned)
// once an operator has dealt with them, and returns how many it deleted.
// Records in another state are left alone. Abandoned records are kept
// until deleted: nothing else deletes them.
func (o *Outbox) DeleteAbandoned(ctx context.Context, db Execer, seqs ...int64) (int64, error) {
	if o.err != nil {
		return 0, o.err
	}
	if len(seqs) == 0 {
		return 0, nil
	}
	args := make([]any, len(seqs))
	for i, s := range seqs {
		args[i] = s
	}
	q := o.opts.Dialect.rebind(`DELETE FROM ` + o.opts.Table + ` WHERE status = 'ABANDONED' AND seq IN (` +
		strings.TrimSuffix(strings.Repeat("?, ", len(seqs)), ", ") + `)`)
	res, err := db.ExecContext(ctx, q, args...)
	if err != nil {
		return 0, fmt.Errorf("outbox: delete abandoned records: %w", missing(o.opts.Table, err))
	}
	return res.RowsAffected()
}

// Stats is a snapshot of an outbox.
type Stats struct {
	// Pending counts PENDING records; OldestPending is the age of the
	// oldest (0 when none), on the database's clock: the relay's lag.
	Pending       int64
	OldestPending time.Duration
	// Abandoned counts ABANDONED records.
	Abandoned int64
}

// Stats reads how many records are pending and abandoned, and the age of
// the oldest pending one.
func (o *Outbox) Stats(ctx context.Context, db Queryer) (Stats, error) {
	if o.err != nil {
		return Stats{}, o.err
	}
	return stats(ctx, db, o.opts.Dialect, o.opts.Table)
}

func stats(ctx context.Context, db Queryer, d Dialect, table string) (Stats, error) {
	q := `SELECT
  (SELECT count(*) FROM ` + table + ` WHERE status = 'PENDING'),
  (SELECT min(` + d.ms("created_at") + `) FROM ` + table + ` WHERE status = 'PENDING'),
  (SELECT count(*) FROM ` + table + ` WHERE status = 'ABANDONED'),
  ` + d.nowMS()
	rows, err := db.QueryContext(ctx, q)
	if err != nil {
		return Stats{}, fmt.Errorf("outbox: stats: %w", missing(table, err))
	}
	defer rows.Close()
	var s Stats
	var oldest sql.NullInt64
	var now int64
	if !rows.Next() {
		return Stats{}, fmt.Errorf("outbox: stats: no row: %w", rows.Err())
	}
	if err := rows.Scan(&s.Pending, &oldest, &s.Abandoned, &now); err != nil {
		return Stats{}, fmt.Errorf("outbox: stats: %w", err)
	}
	if oldest.Valid && now > oldest.Int64 {
		s.OldestPending = time.Duration(now-oldest.Int64) * time.Millisecond
	}
	return s, rows.Err()
}
