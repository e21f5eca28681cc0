package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/seqby/seqby/outbox"
)

// TestRelayBadOptions: Run and Cleanup refuse what they cannot use with a
// clear error, never a panic: no database, a bad or too long table name,
// a LeaseTTL too short for its TTL/3 renewals.
func TestRelayBadOptions(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	e := newEnv(t, outbox.SQLite, true)
	for _, c := range []struct {
		name string
		r    *outbox.Relay
		want error
	}{
		{"nil db", outbox.NewRelay(nil, e.pub, outbox.RelayOptions{Dialect: outbox.SQLite}), outbox.ErrBadOptions},
		{"bad table", outbox.NewRelay(e.db, e.pub, outbox.RelayOptions{Dialect: outbox.SQLite, Table: "x; DROP TABLE y"}), outbox.ErrBadTable},
		{"long table", outbox.NewRelay(e.db, e.pub, outbox.RelayOptions{Dialect: outbox.SQLite, Table: strings.Repeat("t", 60)}), outbox.ErrBadTable},
		{"short lease", outbox.NewRelay(e.db, e.pub, outbox.RelayOptions{Dialect: outbox.SQLite, LeaseTTL: 50 * time.Millisecond}), outbox.ErrBadOptions},
		{"no dialect", outbox.NewRelay(e.db, e.pub, outbox.RelayOptions{}), outbox.ErrNoDialect},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, err := c.r.Cleanup(ctx); !errors.Is(err, c.want) {
				t.Errorf("Cleanup: %v, want %v", err, c.want)
			}
			if err := c.r.Run(ctx); !errors.Is(err, c.want) {
				t.Errorf("Run: %v, want %v", err, c.want)
			}
		})
	}
}

// TestLongTableName: a table name whose derived names (indexes, lease
// table, LISTEN channel) would pass PostgreSQL's 63 bytes is refused by
// Migrate and New with ErrBadTable; the longest allowed one works.
func TestLongTableName(t *testing.T) {
	dialects(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		long := strings.Repeat("t", outbox.MaxTableLen+1)
		if err := outbox.Migrate(ctx, e.db, e.d, long); !errors.Is(err, outbox.ErrBadTable) {
			t.Errorf("Migrate with a %d-byte name: %v, want ErrBadTable", len(long), err)
		}
		if _, err := outbox.New(outbox.Options{Dialect: e.d, Table: long}).Add(ctx, e.db, &note{Seq: 1}); !errors.Is(err, outbox.ErrBadTable) {
			t.Errorf("Add with a %d-byte name: %v, want ErrBadTable", len(long), err)
		}
		ok := strings.Repeat("u", outbox.MaxTableLen)
		if err := outbox.Migrate(ctx, e.db, e.d, ok); err != nil {
			t.Fatalf("Migrate with a %d-byte name: %v", len(ok), err)
		}
		if _, err := outbox.New(outbox.Options{Dialect: e.d, Table: ok}).Add(ctx, e.db, &note{Seq: 1}); err != nil {
			t.Fatal(err)
		}
		e.relay(t, e.pub, outbox.RelayOptions{Table: ok})
		eventually(t, 10*time.Second, "the record published", func() bool { return len(e.stream(t, "note")) == 1 })
	})
}

// TestCleanupDoesNotStallPublishing: a cleanup that cannot finish (here a
// DELETE trigger waits for an advisory lock the test holds; in production
// a huge backlog of old records, a slow disk) does not hold publishing up.
func TestCleanupDoesNotStallPublishing(t *testing.T) {
	e := newEnv(t, outbox.Postgres, true)
	ctx := context.Background()
	for _, stmt := range []string{
		`CREATE FUNCTION wait_for_test() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN PERFORM pg_advisory_xact_lock(4242); RETURN NULL; END $$`,
		`CREATE TRIGGER slow_delete BEFORE DELETE ON seqby_outbox FOR EACH STATEMENT EXECUTE FUNCTION wait_for_test()`,
	} {
		if _, err := e.db.ExecContext(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	hold, err := e.db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Close()
	if _, err := hold.ExecContext(ctx, `SELECT pg_advisory_lock(4242)`); err != nil {
		t.Fatal(err)
	}
	released := false
	release := func() {
		if !released {
			released = true
			hold.ExecContext(ctx, `SELECT pg_advisory_unlock(4242)`)
		}
	}
	defer release()
	_, stop := e.startRelay(t, e.pub, outbox.RelayOptions{Retention: time.Hour, CleanupInterval: 50 * time.Millisecond})
	defer stop()
	eventually(t, 10*time.Second, "the cleanup to wait in its trigger", func() bool {
		return e.count(t, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted`) > 0
	})
	for i := 1; i <= 3; i++ {
		if err := e.placeOrder(ctx, fmt.Sprint(i), &placed{Client: "c-1", Seq: i}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 10*time.Second, "the records published while the cleanup waits", func() bool { return e.pending(t) == 0 })
	checkStreams(t, e, []string{"c-1"}, 3)
	release()
	stop()
}
