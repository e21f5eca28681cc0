package outbox

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// Dialect is the SQL spoken by a database: Postgres or SQLite. Dialects
// compare with ==. The zero Dialect is not usable; the outbox refuses it
// with ErrNoDialect.
type Dialect struct{ name string }

// Postgres is PostgreSQL (with the pgx driver through database/sql,
// driver name "pgx"): the production target. Timestamps are timestamptz,
// the relay wakes on LISTEN/NOTIFY, and Add serializes the writers of one
// partition key with a transaction-scoped advisory lock.
var Postgres = Dialect{name: "postgres"}

// SQLite is SQLite through a pure-Go driver without cgo (modernc.org/sqlite,
// driver name "sqlite"): the embedded default, for one process or a few
// processes sharing a database file in WAL mode. Timestamps are integers,
// milliseconds since the Unix epoch; the relay polls.
var SQLite = Dialect{name: "sqlite"}

const sqliteNowMS = "CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)"

func (d Dialect) pg() bool { return d.name == "postgres" }

// numbered: placeholders are $1, $2, ... (else ?).
func (d Dialect) numbered() bool { return d.pg() }

// listen: the relay wakes on LISTEN/NOTIFY.
func (d Dialect) listen() bool { return d.pg() }

// skipLocked: cleanup batches lock their rows FOR UPDATE SKIP LOCKED.
func (d Dialect) skipLocked() bool { return d.pg() }

// nowMS is an expression for the database clock in milliseconds since
// the Unix epoch.
func (d Dialect) nowMS() string {
	if d.pg() {
		return "(extract(epoch from clock_timestamp()) * 1000)::bigint"
	}
	return sqliteNowMS
}

// falseLit is the literal false.
func (d Dialect) falseLit() string {
	if d.pg() {
		return "FALSE"
	}
	return "0"
}

// now is the database clock as a timestamp column value.
func (d Dialect) now() string {
	if d.pg() {
		return "clock_timestamp()"
	}
	return sqliteNowMS
}

// ms converts a timestamp column to milliseconds since the epoch.
func (d Dialect) ms(col string) string {
	if d.pg() {
		return "(extract(epoch from " + col + ") * 1000)::bigint"
	}
	return col
}

// fromMS converts an expression in milliseconds to a timestamp value.
func (d Dialect) fromMS(x string) string {
	if d.pg() {
		return "to_timestamp(" + x + "::bigint / 1000.0)"
	}
	return x
}

// String is the dialect's name: "postgres" or "sqlite".
func (d Dialect) String() string {
	if d.name == "" {
		return "unset"
	}
	return d.name
}

func (d Dialect) valid() error {
	if d.name == "" {
		return ErrNoDialect
	}
	return nil
}

// rebind turns the ? placeholders of q into $1, $2, ... for Postgres.
func (d Dialect) rebind(q string) string {
	if !d.numbered() {
		return q
	}
	var b strings.Builder
	n := 0
	for _, r := range q {
		if r == '?' {
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// tableName checks a table name: letters, digits and underscores, with at
// most one dot for a PostgreSQL schema ("app.seqby_outbox").
var tableName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?$`)

// DefaultTable is the records table when Options.Table is empty.
const DefaultTable = "seqby_outbox"

// MaxTableLen bounds a table name: PostgreSQL cuts identifiers (and
// LISTEN channels) at 63 bytes, and the outbox derives names from the
// table's: the indexes <table>_published (10 bytes more), the lease table
// <table>_lease, and the channel, the whole name with its schema's dot
// made an underscore. So the name without its schema may have at most
// MaxTableLen bytes, and with it at most 63. Both dialects check it.
const MaxTableLen = 63 - len("_published")

func checkTable(d Dialect, table string) error {
	if !tableName.MatchString(table) || (d.name == "sqlite" && strings.Contains(table, ".")) {
		return fmt.Errorf("outbox: table name %q: use letters, digits and underscores (and, on PostgreSQL, one schema prefix): %w", table, ErrBadTable)
	}
	if len(bare(table)) > MaxTableLen || len(table) > 63 {
		return fmt.Errorf("outbox: table name %q: at most %d bytes (63 with its schema), so that its index, lease table and LISTEN channel names fit PostgreSQL's 63: %w", table, MaxTableLen, ErrBadTable)
	}
	return nil
}

// bare is table without its schema, for index and channel names.
func bare(table string) string {
	if i := strings.LastIndexByte(table, '.'); i >= 0 {
		return table[i+1:]
	}
	return table
}

// isMissingTable reports whether err says a table does not exist.
func isMissingTable(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code == "42P01" // undefined_table
	}
	return err != nil && strings.Contains(err.Error(), "no such table")
}

// isDuplicate reports whether err is a unique violation.
func isDuplicate(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code == "23505" // unique_violation
	}
	return err != nil && strings.Contains(err.Error(), "UNIQUE constraint failed")
}

// missing wraps err, when it says the table is missing, with ErrNoSchema.
func missing(table string, err error) error {
	if isMissingTable(err) {
		return fmt.Errorf("outbox: table %s or %s_lease does not exist; call outbox.Migrate (or run the SQL of outbox.Schema) first: %w: %w", table, table, ErrNoSchema, err)
	}
	return err
}
