package outbox

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/seqby/seqby/runtime"
)

// Execer runs a statement: *sql.Tx, *sql.Conn and *sql.DB all are. Give
// Add the caller's transaction, so the record commits or rolls back with
// the business change it belongs to; with a *sql.DB the record is
// committed on its own, and the outbox guarantees nothing about the rest.
type Execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// Options configure an Outbox.
type Options struct {
	// Dialect is the database's SQL: Postgres or SQLite. Required.
	Dialect Dialect
	// Table is the records table. Default DefaultTable ("seqby_outbox");
	// the lease table is Table + "_lease". Relays of this outbox use the
	// same Table.
	Table string
	// Codec encodes payloads, as the engines decode them. Default
	// Publisher.Codec, else JSON.
	Codec runtime.Codec
	// Publisher is the options of the publisher the relay publishes with:
	// Add checks keys against its BackfillSuffix and writes the trace
	// context with its Propagator, so the relay's PublishRecord refuses no
	// key that Add accepted. Zero: the runtime's defaults.
	Publisher runtime.PublisherOptions
}

// Outbox writes records in the caller's transaction (Add) and lists and
// deletes abandoned ones for operators. It is safe for concurrent use.
type Outbox struct {
	opts Options
	err  error
}

// New returns an Outbox. A missing dialect or a bad table name is reported
// by its methods.
func New(opts Options) *Outbox {
	if opts.Table == "" {
		opts.Table = DefaultTable
	}
	if opts.Codec != nil {
		opts.Publisher.Codec = opts.Codec
	}
	o := &Outbox{opts: opts}
	if o.err = opts.Dialect.valid(); o.err == nil {
		o.err = checkTable(opts.Dialect, opts.Table)
	}
	return o
}

// Table is the records table.
func (o *Outbox) Table() string { return o.opts.Table }

// Add checks msg as Publish does (its category, and its partition key
// with the generated extractor against the key rules) and inserts it as a
// PENDING record through tx, which must be the caller's transaction. It
// returns the record's message id: WithMessageID's or a new random one,
// the idempotency key under which the relay publishes it.
//
// A key that breaks the rules fails with the *runtime.KeyError (errors.Is
// runtime.ErrInvalidKey) and inserts nothing: return the error from the
// transaction so the business change rolls back with it. Of opts,
// WithMessageID and AsBackfill apply.
//
// On PostgreSQL, Add also takes a transaction-scoped advisory lock on the
// record's partition (category and key), so two transactions writing
// records of one key commit in the order of their seq numbers (which the
// relay publishes in), and notifies the relays (delivered at commit). The
// lock lasts until the transaction ends: two transactions adding records
// of keys a, b and b, a can deadlock, and PostgreSQL aborts one (40P01):
// add a transaction's keys in a consistent order, and retry the
// transaction when IsRetryable(err).
func (o *Outbox) Add(ctx context.Context, tx Execer, msg runtime.Message, opts ...runtime.PublishOption) (string, error) {
	if o.err != nil {
		return "", o.err
	}
	r, err := o.opts.Publisher.NewRecord(ctx, msg, opts...)
	if err != nil {
		return "", fmt.Errorf("outbox add: %w", err)
	}
	if err := o.insert(ctx, tx, r); err != nil {
		return "", err
	}
	return r.MessageID, nil
}

// insert writes r as a PENDING record.
func (o *Outbox) insert(ctx context.Context, tx Execer, r runtime.Record) error {
	trace := ""
	if len(r.Trace) > 0 {
		b, err := json.Marshal(r.Trace)
		if err != nil {
			return fmt.Errorf("outbox add %s: encode trace: %w", r.Type, err)
		}
		trace = string(b)
	}
	t := o.opts.Table
	cols := `INSERT INTO ` + t + ` (message_id, category, partition_key, partitioned, backfill, type, payload, trace) `
	args := []any{r.MessageID, r.Category, r.Key, r.Partitioned, r.Backfill, r.Type, r.Payload, trace}
	var q string
	switch o.opts.Dialect.name {
	case "postgres":
		sel := `SELECT $1::text, $2::text, $3::text, $4::boolean, $5::boolean, $6::text, $7::bytea, $8::text FROM `
		if r.Partitioned {
			q = cols + sel + `(SELECT pg_advisory_xact_lock(hashtextextended($9, 0)), pg_notify($10, '')) AS l`
			args = append(args, "seqby-outbox:"+r.Category+":"+r.Key, channel(t))
		} else {
			q = cols + sel + `(SELECT pg_notify($9, '')) AS l`
			args = append(args, channel(t))
		}
	default:
		q = cols + `VALUES (?, ?, ?, ?, ?, ?, ?, ?)`
	}
	if _, err := tx.ExecContext(ctx, q, args...); err != nil {
		if isDuplicate(err) {
			return fmt.Errorf("outbox add %s: message id %q: %w", r.Type, r.MessageID, ErrDuplicateMessageID)
		}
		return fmt.Errorf("outbox add %s: %w", r.Type, missing(t, err))
	}
	return nil
}

// channel is the LISTEN/NOTIFY channel of a records table.
func channel(table string) string { return strings.ReplaceAll(table, ".", "_") }
