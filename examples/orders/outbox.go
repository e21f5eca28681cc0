package main

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // driver "pgx", for DATABASE_URL
	_ "modernc.org/sqlite"             // driver "sqlite", the default

	"github.com/seqby/seqby/outbox"
	"github.com/seqby/seqby/runtime"
)

// store is the demo service's database: its carts table and the outbox
// its events are recorded in, in the same transaction, for the relay to
// publish.
type store struct {
	db    *sql.DB
	d     outbox.Dialect
	ob    *outbox.Outbox
	where string
	close func()
}

// openStore opens PostgreSQL at databaseURL, or else a SQLite file in a
// new temporary directory, and migrates the outbox and the carts table.
func openStore(ctx context.Context, databaseURL string) (*store, error) {
	s := &store{close: func() {}}
	var err error
	if databaseURL != "" {
		s.d, s.where = outbox.Postgres, "PostgreSQL (DATABASE_URL)"
		s.db, err = sql.Open("pgx", databaseURL)
	} else {
		dir, derr := os.MkdirTemp("", "seqby-orders-")
		if derr != nil {
			return nil, derr
		}
		s.close = func() { os.RemoveAll(dir) }
		file := filepath.Join(dir, "orders.db")
		s.d, s.where = outbox.SQLite, "SQLite ("+file+")"
		s.db, err = sql.Open("sqlite", "file:"+file+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)")
	}
	if err != nil {
		s.close()
		return nil, err
	}
	done := s.close
	s.close = func() { s.db.Close(); done() }
	s.ob = outbox.New(outbox.Options{Dialect: s.d})
	if err := s.ob.Migrate(ctx, s.db); err != nil {
		s.close()
		return nil, fmt.Errorf("DATABASE_URL: %w", err)
	}
	if _, err := s.db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS carts (client_id TEXT NOT NULL, seq INTEGER NOT NULL, item TEXT NOT NULL)`); err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

// record is the service's operation: the cart change and its event, in
// one transaction. A bad key fails Add, and the change rolls back with it.
func (s *store) record(ctx context.Context, client string, seq int, item string, msg runtime.Message) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	q := `INSERT INTO carts (client_id, seq, item) VALUES (?, ?, ?)`
	if s.d == outbox.Postgres {
		q = `INSERT INTO carts (client_id, seq, item) VALUES ($1, $2, $3)`
	}
	if _, err := tx.ExecContext(ctx, q, client, seq, item); err != nil {
		return err
	}
	if _, err := s.ob.Add(ctx, tx, msg); err != nil {
		return err
	}
	return tx.Commit()
}

// relay runs the outbox relay, publishing through pub, until ctx ends.
func (s *store) relay(ctx context.Context, pub *runtime.Publisher, stderr io.Writer) (stop func()) {
	r := s.ob.NewRelay(s.db, pub, outbox.RelayOptions{PollInterval: 10 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := r.Run(rctx); err != nil {
			fmt.Fprintf(stderr, "orders: outbox relay: %v\n", err)
		}
	}()
	return func() { cancel(); <-done }
}
