package outbox_test

import (
	"context"
	"errors"
	"testing"

	"github.com/seqby/seqby/outbox"
	"github.com/seqby/seqby/runtime"
)

// TestAddKeyErrorRollsBack: a key that breaks the rules fails Add with
// the key error, the caller's transaction rolls back, and neither the
// business row nor a record is left; a good key records one PENDING
// record with the returned message id.
func TestAddKeyErrorRollsBack(t *testing.T) {
	dialects(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		for _, bad := range []string{"", "a{b}", "backfill"} {
			err := e.placeOrder(ctx, "o-bad-"+bad, &placed{Client: bad, Seq: 1})
			var ke *runtime.KeyError
			if !errors.Is(err, runtime.ErrInvalidKey) || !errors.As(err, &ke) {
				t.Fatalf("key %q: Add error %v, want a *runtime.KeyError (ErrInvalidKey)", bad, err)
			}
		}
		if n := e.count(t, `SELECT count(*) FROM seqby_outbox`); n != 0 {
			t.Fatalf("%d records after key errors, want 0", n)
		}
		if n := e.count(t, `SELECT count(*) FROM orders`); n != 0 {
			t.Fatalf("%d business rows after key errors, want 0 (rolled back)", n)
		}

		tx, err := e.db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.ExecContext(ctx, e.q(`INSERT INTO orders (id, client) VALUES (?, ?)`), "o-1", "c-1"); err != nil {
			t.Fatal(err)
		}
		id, err := e.ob.Add(ctx, tx, &placed{Client: "c-1", Seq: 1}, runtime.WithMessageID("m-1"))
		if err != nil || id != "m-1" {
			t.Fatalf("Add: %q, %v", id, err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		if n := e.count(t, `SELECT count(*) FROM seqby_outbox WHERE status = 'PENDING' AND message_id = 'm-1' AND partition_key = 'c-1' AND category = 'order'`); n != 1 {
			t.Fatalf("%d pending records m-1, want 1", n)
		}
		// The message id is the idempotency key: a second record with it
		// is refused.
		_, err = e.ob.Add(ctx, e.db, &placed{Client: "c-1", Seq: 2}, runtime.WithMessageID("m-1"))
		if !errors.Is(err, outbox.ErrDuplicateMessageID) {
			t.Fatalf("Add with a used message id: %v, want ErrDuplicateMessageID", err)
		}
		// A random id otherwise, different each time.
		a, err1 := e.ob.Add(ctx, e.db, &placed{Client: "c-1", Seq: 3})
		b, err2 := e.ob.Add(ctx, e.db, &note{Seq: 1})
		if err1 != nil || err2 != nil || a == "" || a == b {
			t.Fatalf("Add: %q %v, %q %v", a, err1, b, err2)
		}
	})
}

// TestAddUsesThePublishersRules: with the relay's publisher options, Add
// refuses a key that publisher reserves (its backfill suffix), so no
// record Add accepts is abandoned for its key.
func TestAddUsesThePublishersRules(t *testing.T) {
	e := newEnv(t, outbox.SQLite, true)
	ob := outbox.New(outbox.Options{Dialect: outbox.SQLite, Publisher: runtime.PublisherOptions{BackfillSuffix: "lane"}})
	if _, err := ob.Add(context.Background(), e.db, &placed{Client: "lane", Seq: 1}); !errors.Is(err, runtime.ErrInvalidKey) {
		t.Fatalf("key %q with BackfillSuffix lane: %v, want ErrInvalidKey", "lane", err)
	}
	if _, err := ob.Add(context.Background(), e.db, &placed{Client: "c-1", Seq: 1}); err != nil {
		t.Fatal(err)
	}
}

// TestMissingSchemaSaysMigrate: nothing creates tables silently; Add and
// Run fail with ErrNoSchema, and Migrate (idempotent) fixes it.
func TestMissingSchemaSaysMigrate(t *testing.T) {
	for _, d := range []outbox.Dialect{outbox.SQLite, outbox.Postgres} {
		t.Run(d.String(), func(t *testing.T) {
			e := newEnv(t, d, false)
			ctx := context.Background()
			if _, err := e.ob.Add(ctx, e.db, &placed{Client: "c-1", Seq: 1}); !errors.Is(err, outbox.ErrNoSchema) {
				t.Fatalf("Add without a schema: %v, want ErrNoSchema", err)
			}
			r := outbox.NewRelay(e.db, e.pub, outbox.RelayOptions{Dialect: d})
			if err := r.Run(ctx); !errors.Is(err, outbox.ErrNoSchema) {
				t.Fatalf("Run without a schema: %v, want ErrNoSchema", err)
			}
			for range 2 {
				if err := outbox.Migrate(ctx, e.db, d); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := e.ob.Add(ctx, e.db, &placed{Client: "c-1", Seq: 1}); err != nil {
				t.Fatal(err)
			}
		})
	}
	if _, err := outbox.New(outbox.Options{}).Add(context.Background(), nil, &note{}); !errors.Is(err, outbox.ErrNoDialect) {
		t.Fatalf("Add without a dialect: %v", err)
	}
	if _, err := outbox.New(outbox.Options{Dialect: outbox.SQLite, Table: "x; DROP TABLE y"}).Add(context.Background(), nil, &note{}); !errors.Is(err, outbox.ErrBadTable) {
		t.Fatalf("Add with a bad table name: %v", err)
	}
}
