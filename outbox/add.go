package outbox

import (
	"cmp"
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

// Options configure an Outbox. The Outbox is the one place the dialect and
// table are given: its Migrate, Schema and NewRelay take them from here.
type Options struct {
	// Dialect is the database's SQL: Postgres or SQLite. Required.
	Dialect Dialect
	// Table is the records table. Default DefaultTable ("seqby_outbox");
	// the lease table is Table + "_lease". Relays made with NewRelay use
	// the same Table.
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

// Outbox writes records in the caller's transaction (Add), creates its
// tables (Migrate, Schema), makes the relays that publish them (NewRelay),
// and lists and deletes abandoned records for operators, all in the
// dialect and table of its Options. It is safe for concurrent use.
//
//	ob := outbox.New(outbox.Options{Dialect: outbox.Postgres})
//	err := ob.Migrate(ctx, db)
//	relay := ob.NewRelay(db, runtime.NewPublisher(client), outbox.RelayOptions{})
type Outbox struct {
	opts Options
	err  error
}

// New returns an Outbox. A missing dialect or a bad table name is reported
// by its methods (ErrNoDialect, ErrBadTable), and by Run and Cleanup of
// its relays.
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

// Dialect is the database's SQL, as given in Options: for the caller's own
// statements in the transactions it passes to Add (placeholders are $1 on
// PostgreSQL, ? on SQLite).
func (o *Outbox) Dialect() Dialect { return o.opts.Dialect }

// Schema returns the SQL that creates the outbox's tables (see the
// function Schema) in its dialect, named after its table, for your own
// migrations. It is "" when the Options are unusable (Migrate says why).
func (o *Outbox) Schema() string {
	if o.err != nil {
		return ""
	}
	return schemaSQL(o.opts.Dialect, o.opts.Table)
}

// Migrate creates the outbox's tables in db if they do not exist: the SQL
// of Schema, in one transaction. It is safe to call at every start, from
// several processes.
func (o *Outbox) Migrate(ctx context.Context, db *sql.DB) error {
	if o.err != nil {
		return o.err
	}
	return migrate(ctx, db, o.opts.Dialect, o.opts.Table)
}

// NewRelay returns a relay publishing the outbox's records of db through
// pub, in the Outbox's dialect and table: leave opts.Dialect and
// opts.Table zero (a different value is an error of Run, ErrBadOptions).
// Run it with Run; bad options are reported by Run. On PostgreSQL the
// relay keeps one of db's connections for LISTEN while it runs (with a
// pool limited to one connection, SetMaxOpenConns(1), it polls instead).
//
// pub should publish with the Options.Publisher the Outbox checks keys
// with: runtime.NewPublisher(client, opts.Publisher), or
// runtime.NewPublisher(client) when they are the defaults.
func (o *Outbox) NewRelay(db *sql.DB, pub Publisher, opts RelayOptions) *Relay {
	var conflict error
	switch {
	case opts.Dialect != (Dialect{}) && opts.Dialect != o.opts.Dialect:
		conflict = fmt.Errorf("outbox: RelayOptions.Dialect %s differs from the Outbox's, %s: leave it unset, Outbox.NewRelay sets it: %w", opts.Dialect, o.opts.Dialect, ErrBadOptions)
	case opts.Table != "" && opts.Table != o.opts.Table:
		conflict = fmt.Errorf("outbox: RelayOptions.Table %q differs from the Outbox's, %q: leave it unset, Outbox.NewRelay sets it: %w", opts.Table, o.opts.Table, ErrBadOptions)
	}
	opts.Dialect, opts.Table = o.opts.Dialect, o.opts.Table
	r := newRelay(db, pub, opts)
	r.err = cmp.Or(o.err, conflict)
	return r
}

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
		return "", addError{msg: msg, err: err}
	}
	if err := o.insert(ctx, tx, r); err != nil {
		return "", err
	}
	return r.MessageID, nil
}

// addError is Add's refusal of a message, before anything is written:
// the runtime's check (a *runtime.KeyError, runtime.ErrInvalidKey,
// ErrInvalidMessageID or ErrPublish) in the words of what Add does, which
// is adding a record in the caller's transaction, not publishing. It
// unwraps to the runtime's error, so errors.Is and errors.As match as
// they do on Publish's.
type addError struct {
	msg runtime.Message
	err error
}

func (e addError) Error() string {
	// The runtime's check is shared with Publish and says "publish T:"
	// and, for a message it cannot take at all, ends with ErrPublish's
	// "publish failed": neither is what failed here.
	cause := e.err.Error()
	if i := strings.Index(cause, ": "); i >= 0 && strings.HasPrefix(cause, "publish") {
		cause = cause[i+2:]
	}
	cause = strings.TrimSuffix(cause, ": "+runtime.ErrPublish.Error())
	return fmt.Sprintf("outbox: add a record of %s in the caller's transaction: %s; nothing was recorded: return the error so the transaction rolls back", typeOf(e.msg), cause)
}

func (e addError) Unwrap() error { return e.err }

// typeOf names msg's Go type for an error ("nil" for a nil message).
func typeOf(msg runtime.Message) string {
	if msg == nil {
		return "nil"
	}
	return fmt.Sprintf("%T", msg)
}

// insert writes r as a PENDING record.
func (o *Outbox) insert(ctx context.Context, tx Execer, r runtime.Record) error {
	trace := ""
	if len(r.Trace) > 0 {
		b, err := json.Marshal(r.Trace)
		if err != nil {
			return fmt.Errorf("outbox: add a record of %s in the caller's transaction: encode its trace context: %w", r.Type, err)
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
			return fmt.Errorf("outbox: add a record of %s in the caller's transaction: message id %q: %w", r.Type, r.MessageID, ErrDuplicateMessageID)
		}
		return fmt.Errorf("outbox: add a record of %s in the caller's transaction: %w", r.Type, missing(t, err))
	}
	return nil
}

// channel is the LISTEN/NOTIFY channel of a records table.
func channel(table string) string { return strings.ReplaceAll(table, ".", "_") }
