package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/seqby/seqby/outbox"
)

// TestAddDeadlockIsRetryable: on PostgreSQL two transactions that add
// records of keys a, b and b, a deadlock on Add's per-key advisory locks,
// as documented; PostgreSQL aborts one (SQLSTATE 40P01), Add's error says
// so through outbox.IsRetryable, and the other goes through and commits
// (PostgreSQL releases the victim's locks when it aborts it).
func TestAddDeadlockIsRetryable(t *testing.T) {
	e := newEnv(t, outbox.Postgres, true)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tx1, err := e.db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx1.Rollback()
	tx2, err := e.db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx2.Rollback()
	if _, err := e.ob.Add(ctx, tx1, &placed{Client: "a", Seq: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.ob.Add(ctx, tx2, &placed{Client: "b", Seq: 1}); err != nil {
		t.Fatal(err)
	}
	type result struct {
		tx  int
		err error
	}
	res := make(chan result, 2)
	go func() {
		_, err := e.ob.Add(ctx, tx1, &placed{Client: "b", Seq: 2})
		res <- result{1, err}
	}()
	eventually(t, 10*time.Second, "tx1 to wait for b's lock", func() bool {
		return e.count(t, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted`) == 1
	})
	go func() {
		_, err := e.ob.Add(ctx, tx2, &placed{Client: "a", Seq: 2})
		res <- result{2, err}
	}()
	// PostgreSQL releases the victim's locks when it aborts it, before its
	// rollback, so the other Add may return first: take both results.
	r1, r2 := <-res, <-res
	victimRes, otherRes := r1, r2
	if r1.err == nil {
		victimRes, otherRes = r2, r1
	}
	if victimRes.err == nil || otherRes.err != nil {
		t.Fatalf("want one Add aborted and the other through: tx%d: %v, tx%d: %v", r1.tx, r1.err, r2.tx, r2.err)
	}
	if !outbox.IsRetryable(victimRes.err) {
		t.Fatalf("tx%d: %v: IsRetryable false for a deadlock", victimRes.tx, victimRes.err)
	}
	t.Logf("tx%d aborted: %v", victimRes.tx, victimRes.err)
	victim, other := tx1, tx2
	if victimRes.tx == 2 {
		victim, other = tx2, tx1
	}
	victim.Rollback()
	if err := other.Commit(); err != nil {
		t.Fatal(err)
	}
	if outbox.IsRetryable(errors.New("other")) || outbox.IsRetryable(fmt.Errorf("x: %w", outbox.ErrDuplicateMessageID)) {
		t.Error("IsRetryable true for errors that are not conflicts")
	}
}
