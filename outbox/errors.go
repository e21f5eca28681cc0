package outbox

import "errors"

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
	// ErrBadTable: the table name is not a plain SQL identifier.
	ErrBadTable = errors.New("bad outbox table name")
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
