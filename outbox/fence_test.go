package outbox

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite"

	"github.com/seqby/seqby/internal/pgtest"
	"github.com/seqby/seqby/runtime"
)

// TestFence: once a successor has taken the lease, the old holder's
// marks (published or abandoned) change nothing and report the lease
// lost, and its renewal fails; the successor's generation is higher.
func TestFence(t *testing.T) {
	for _, d := range []Dialect{SQLite, Postgres} {
		t.Run(d.String(), func(t *testing.T) {
			ctx := context.Background()
			var db *sql.DB
			var err error
			if d == Postgres {
				s := pgtest.New(t)
				db, err = sql.Open("pgx", s.DSN)
			} else {
				db, err = sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "o.db")+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)")
			}
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if err := Migrate(ctx, db, d); err != nil {
				t.Fatal(err)
			}
			ob := New(Options{Dialect: d})
			for _, k := range []string{"a", "b"} {
				if _, err := ob.Add(ctx, db, &fenceMsg{K: k}); err != nil {
					t.Fatal(err)
				}
			}
			ttl := 300 * time.Millisecond
			old := NewRelay(db, nil, RelayOptions{Dialect: d, Owner: "old", LeaseTTL: ttl})
			next := NewRelay(db, nil, RelayOptions{Dialect: d, Owner: "next", LeaseTTL: ttl})
			if err := old.ensureLease(ctx); err != nil {
				t.Fatal(err)
			}
			lo, err := old.acquire(ctx)
			if err != nil || lo == nil {
				t.Fatalf("old acquire: %v, %v", lo, err)
			}
			if ln, err := next.acquire(ctx); err != nil || ln != nil {
				t.Fatalf("next took a held lease: %v, %v", ln, err)
			}
			// Wait (by polling, not sleeping a fixed time) until the lease
			// has expired on the database's clock and next takes it.
			var ln *lease
			deadline := time.Now().Add(10 * time.Second)
			for ln == nil {
				if time.Now().After(deadline) {
					t.Fatal("next never took the expired lease")
				}
				if ln, err = next.acquire(ctx); err != nil {
					t.Fatal(err)
				}
				time.Sleep(10 * time.Millisecond)
			}
			if ln.gen <= lo.gen {
				t.Fatalf("generation %d after takeover, old had %d", ln.gen, lo.gen)
			}
			if _, ok := lo.valid(); ok {
				t.Fatal("old still believes it holds the lease past its local deadline")
			}
			if err := old.markPublished(ctx, lo, []int64{1}); !errors.Is(err, errLeaseLost) {
				t.Fatalf("old's mark: %v, want errLeaseLost", err)
			}
			if err := old.abandon(ctx, lo, pending{seq: 2}, errors.New("x")); !errors.Is(err, errLeaseLost) {
				t.Fatalf("old's abandon: %v, want errLeaseLost", err)
			}
			if ok, err := old.renew(ctx, lo); ok || err != nil {
				t.Fatalf("old renewed a lease it lost: %v, %v", ok, err)
			}
			var n int
			if err := db.QueryRowContext(ctx, `SELECT count(*) FROM seqby_outbox WHERE status = 'PENDING'`).Scan(&n); err != nil || n != 2 {
				t.Fatalf("%d pending after the fenced marks, want 2 (%v)", n, err)
			}
			if err := next.markPublished(ctx, ln, []int64{1}); err != nil {
				t.Fatalf("next's mark: %v", err)
			}
		})
	}
}

type fenceMsg struct{ K string }

func (*fenceMsg) StreamCategory() string          { return "fence" }
func (m *fenceMsg) PartitionKey() (string, error) { return runtime.Key("fence", "K", m.K) }
