package outbox

import (
	"errors"

	"github.com/jackc/pgx/v5/pgconn"
)

// Sentinel errors callers may branch on (errors.Is). A key that breaks the
// key rules is runtime.ErrInvalidKey, passed through from runtime.NewRecord.
var (
	// ErrNoSchema: the outbox tables do not exist. Call Migrate, or run
	// the SQL of Schema with your own migrations; nothing creates them
	// silently.
	ErrNoSchema = errors.New("outbox schema missing")
	// ErrNoDialect: Options.Dialect or RelayOptions.Dialect is not set;
	// use outbox.Postgres or outbox.SQLite.
	ErrNoDialect = errors.New("outbox dialect not set: use outbox.Postgres or outbox.SQLite")
	// ErrBadTable: the table name is not a plain SQL identifier, or is too
	// long (see MaxTableLen).
	ErrBadTable = errors.New("bad outbox table name")
	// ErrBadOptions: NewRelay's options are unusable or contradict the
	// Outbox's dialect or table (Run and Cleanup return it), or NewRelay
	// was given no database or publisher.
	ErrBadOptions = errors.New("bad outbox relay options")
	// ErrDuplicateMessageID: a record with this message id is already in
	// the outbox (a WithMessageID reused). The message id is the
	// idempotency key downstream, so the second record is refused.
	ErrDuplicateMessageID = errors.New("outbox already holds a record with this message id")
)

// Record statuses, as stored in the status column.
const (
	// StatusPending: recorded, not yet published.
	StatusPending = "PENDING"
	// StatusPublished: published to Redis (at least once).
	StatusPublished = "PUBLISHED"
	// StatusAbandoned: can never be published (invalid key or record);
	// reason says why. Never retried.
	StatusAbandoned = "ABANDONED"
)

// IsRetryable reports whether err (from Add, or from the caller's
// transaction around it) is a transient conflict after which the whole
// transaction should be retried: on PostgreSQL a deadlock (SQLSTATE 40P01,
// which Add's per-key advisory locks can cause when two transactions add
// records of the same keys in different orders) or a serialization
// failure (40001); on SQLite a busy or locked database (SQLITE_BUSY,
// SQLITE_LOCKED). The transaction has been aborted: roll it back, and run
// it again from the start.
func IsRetryable(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code == "40P01" || pe.Code == "40001"
	}
	var se interface{ Code() int }
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case 5, 6: // SQLITE_BUSY, SQLITE_LOCKED (and their extended codes)
			return true
		}
	}
	return false
}
