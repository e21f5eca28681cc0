package outbox

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
)

// Schema returns the SQL that creates the outbox's tables in d, named
// after table ("" means DefaultTable): the records table, its indexes, and
// the relays' lease table <table>_lease. Every statement is idempotent
// (IF NOT EXISTS). Run it with your own migrations, or call Migrate.
//
// Deprecated: use Outbox.Schema, which takes the dialect and table from
// the Outbox's Options, given once there.
func Schema(d Dialect, table ...string) string {
	t := DefaultTable
	if len(table) > 0 && table[0] != "" {
		t = table[0]
	}
	return schemaSQL(d, t)
}

// schemaSQL is the schema's statements as one script.
func schemaSQL(d Dialect, t string) string { return strings.Join(schema(d, t), ";\n\n") + ";\n" }

func schema(d Dialect, t string) []string {
	b := bare(t)
	switch d.name {
	case "postgres":
		return []string{
			`CREATE TABLE IF NOT EXISTS ` + t + ` (
  seq           BIGSERIAL PRIMARY KEY,          -- insertion order
  message_id    TEXT NOT NULL UNIQUE,           -- idempotency key downstream
  category      TEXT NOT NULL,
  partition_key TEXT NOT NULL DEFAULT '',       -- '' when not partitioned
  partitioned   BOOLEAN NOT NULL,
  backfill      BOOLEAN NOT NULL DEFAULT FALSE,
  type          TEXT NOT NULL,                  -- wire type name
  payload       BYTEA NOT NULL,                 -- codec-encoded message
  trace         TEXT NOT NULL DEFAULT '',       -- W3C trace context, JSON
  created_at    TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(),
  status        TEXT NOT NULL DEFAULT 'PENDING'
                CHECK (status IN ('PENDING', 'PUBLISHED', 'ABANDONED')),
  published_at  TIMESTAMPTZ,                    -- PUBLISHED, or ABANDONED: when
  reason        TEXT NOT NULL DEFAULT ''        -- ABANDONED: why
)`,
			`CREATE INDEX IF NOT EXISTS ` + b + `_pending ON ` + t + ` (seq) WHERE status = 'PENDING'`,
			`CREATE INDEX IF NOT EXISTS ` + b + `_published ON ` + t + ` (published_at) WHERE status = 'PUBLISHED'`,
			`CREATE INDEX IF NOT EXISTS ` + b + `_abandoned ON ` + t + ` (seq) WHERE status = 'ABANDONED'`,
			`CREATE TABLE IF NOT EXISTS ` + t + `_lease (
  name       TEXT PRIMARY KEY,   -- RelayOptions.Name
  owner      TEXT NOT NULL,      -- RelayOptions.Owner of the holder
  generation BIGINT NOT NULL,    -- +1 on every acquisition: the fencing token
  expires_at BIGINT NOT NULL     -- database clock, ms since the Unix epoch
)`,
		}
	default:
		return []string{
			`CREATE TABLE IF NOT EXISTS ` + t + ` (
  seq           INTEGER PRIMARY KEY AUTOINCREMENT, -- insertion order
  message_id    TEXT NOT NULL UNIQUE,              -- idempotency key downstream
  category      TEXT NOT NULL,
  partition_key TEXT NOT NULL DEFAULT '',          -- '' when not partitioned
  partitioned   INTEGER NOT NULL,                  -- 0 or 1
  backfill      INTEGER NOT NULL DEFAULT 0,
  type          TEXT NOT NULL,                     -- wire type name
  payload       BLOB NOT NULL,                     -- codec-encoded message
  trace         TEXT NOT NULL DEFAULT '',          -- W3C trace context, JSON
  created_at    INTEGER NOT NULL DEFAULT (` + sqliteNowMS + `), -- ms since the Unix epoch
  status        TEXT NOT NULL DEFAULT 'PENDING'
                CHECK (status IN ('PENDING', 'PUBLISHED', 'ABANDONED')),
  published_at  INTEGER,                           -- ms; PUBLISHED, or ABANDONED: when
  reason        TEXT NOT NULL DEFAULT ''           -- ABANDONED: why
)`,
			`CREATE INDEX IF NOT EXISTS ` + b + `_pending ON ` + t + ` (seq) WHERE status = 'PENDING'`,
			`CREATE INDEX IF NOT EXISTS ` + b + `_published ON ` + t + ` (published_at) WHERE status = 'PUBLISHED'`,
			`CREATE INDEX IF NOT EXISTS ` + b + `_abandoned ON ` + t + ` (seq) WHERE status = 'ABANDONED'`,
			`CREATE TABLE IF NOT EXISTS ` + t + `_lease (
  name       TEXT PRIMARY KEY,   -- RelayOptions.Name
  owner      TEXT NOT NULL,      -- RelayOptions.Owner of the holder
  generation INTEGER NOT NULL,   -- +1 on every acquisition: the fencing token
  expires_at INTEGER NOT NULL    -- database clock, ms since the Unix epoch
)`,
		}
	}
}

// Migrate creates the outbox's tables in db if they do not exist (the SQL
// of Schema, in one transaction). It is safe to call at every start, from
// several processes. table names the records table ("" or nothing:
// DefaultTable).
//
// Deprecated: use Outbox.Migrate, which takes the dialect and table from
// the Outbox's Options, given once there.
func Migrate(ctx context.Context, db *sql.DB, d Dialect, table ...string) error {
	if err := d.valid(); err != nil {
		return err
	}
	t := DefaultTable
	if len(table) > 0 && table[0] != "" {
		t = table[0]
	}
	if err := checkTable(d, t); err != nil {
		return err
	}
	return migrate(ctx, db, d, t)
}

// migrate runs the schema of table t in one transaction.
func migrate(ctx context.Context, db *sql.DB, d Dialect, t string) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("outbox: migrate: %w", err)
	}
	defer tx.Rollback()
	if d.name == "postgres" {
		// Concurrent CREATE TABLE IF NOT EXISTS can still collide in the
		// catalog: serialize migrations of this table.
		if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`, "seqby-outbox-migrate:"+t); err != nil {
			return fmt.Errorf("outbox: migrate: %w", err)
		}
	}
	for _, stmt := range schema(d, t) {
		if _, err := tx.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("outbox: migrate %s: %w", t, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("outbox: migrate %s: %w", t, err)
	}
	return nil
}
