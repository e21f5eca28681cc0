package outbox

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/seqby/seqby/internal/pgtest"
	"github.com/seqby/seqby/runtime"
)

// scriptPublisher returns, for each attempt of a message id, the next
// error of its script (nil once the script is used up), and counts the
// attempts.
type scriptPublisher struct {
	mu     sync.Mutex
	script map[string][]error
	tries  map[string]int
}

func (s *scriptPublisher) PublishRecord(ctx context.Context, r runtime.Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tries[r.MessageID]++
	if errs := s.script[r.MessageID]; len(errs) > 0 {
		s.script[r.MessageID] = errs[1:]
		return errs[0]
	}
	return nil
}

func (s *scriptPublisher) attempts() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]int{}
	for id, n := range s.tries {
		out[id] = n
	}
	return out
}

// leadingRelay returns a database of dialect d with the schema, and a
// relay on it publishing through pub that holds the lease, as lead sets
// it up, for a test to drive its rounds one at a time.
func leadingRelay(t *testing.T, d Dialect, pub Publisher, opts RelayOptions) (*sql.DB, *Relay, *lease) {
	t.Helper()
	ctx := context.Background()
	var db *sql.DB
	var err error
	if d == Postgres {
		db, err = sql.Open("pgx", pgtest.New(t).DSN)
	} else {
		db, err = sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "o.db")+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)")
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if err := Migrate(ctx, db, d); err != nil {
		t.Fatal(err)
	}
	opts.Dialect, opts.Owner, opts.LeaseTTL = d, "t", time.Minute
	opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	r := NewRelay(db, pub, opts)
	if err := r.ensureLease(ctx); err != nil {
		t.Fatal(err)
	}
	l, err := r.acquire(ctx)
	if err != nil || l == nil {
		t.Fatalf("acquire: %v, %v", l, err)
	}
	if r.m, err = newMeters(r); err != nil {
		t.Fatal(err)
	}
	r.backoff = map[group]*partBackoff{}
	r.retryBudget = r.opts.Concurrency
	return db, r, l
}

// TestBackoffRounds drives the relay's rounds one at a time. A partition
// whose head failed stays out of the fetch after its backoff step has
// ended; the partitions whose step ended are retried by their head alone,
// at most the retry budget of them per round: Concurrency at first,
// doubled after a round whose retries all moved on, back to Concurrency
// after one whose retry failed (see TestPickDue for the choice among
// more); a head abandoned on its retry is progress (the partition is back
// in the window); an entry of a partition with nothing pending is dropped
// when it is due; the others are kept.
func TestBackoffRounds(t *testing.T) {
	for _, d := range []Dialect{SQLite, Postgres} {
		t.Run(d.String(), func(t *testing.T) {
			ctx := context.Background()
			transient := fmt.Errorf("timeout: %w", runtime.ErrPublish)
			sp := &scriptPublisher{tries: map[string]int{}, script: map[string][]error{
				"a-1": {transient, fmt.Errorf("key a: %w", runtime.ErrInvalidKey)},
				"x-1": {transient, transient, transient},
			}}
			// A PollInterval of an hour: no step ends unless the test
			// moves it.
			db, r, l := leadingRelay(t, d, sp, RelayOptions{PollInterval: time.Hour, BatchSize: 10, Concurrency: 1})
			ob := New(Options{Dialect: d})
			for _, m := range []struct{ id, key string }{{"a-1", "a"}, {"a-2", "a"}, {"x-1", "x"}, {"b-1", "b"}} {
				if _, err := ob.Add(ctx, db, &fenceMsg{K: m.key}, runtime.WithMessageID(m.id)); err != nil {
					t.Fatal(err)
				}
			}
			ga := group{partitioned: true, category: "fence", key: "a"}
			gx := group{partitioned: true, category: "fence", key: "x"}
			gc := group{partitioned: true, category: "fence", key: "c"} // nothing pending
			round := func(n int, wantTries map[string]int, want ...group) {
				t.Helper()
				if _, err := r.round(ctx, l); err != nil {
					t.Fatalf("round %d: %v", n, err)
				}
				if got := sp.attempts(); fmt.Sprint(got) != fmt.Sprint(wantTries) {
					t.Fatalf("after round %d, attempts %v, want %v", n, got, wantTries)
				}
				if len(r.backoff) != len(want) {
					t.Fatalf("after round %d, %d partitions back off, want %v", n, len(r.backoff), want)
				}
				for _, g := range want {
					if r.backoff[g] == nil {
						t.Fatalf("after round %d, %v does not back off", n, g)
					}
				}
			}
			// a-1 and x-1 fail: a-2 waits; b-1 is published.
			round(1, map[string]int{"a-1": 1, "b-1": 1, "x-1": 1}, ga, gx)
			// Steps not over: nothing is tried.
			round(2, map[string]int{"a-1": 1, "b-1": 1, "x-1": 1}, ga, gx)
			past := time.Now().Add(-time.Minute)
			r.backoff[ga].until = past.Add(-3 * time.Second)
			r.backoff[gc] = &partBackoff{fails: 1, until: past.Add(-2 * time.Second)}
			r.backoff[gx].until = past.Add(-time.Second)
			// Every step is over, but one partition is retried (a budget
			// of Concurrency, 1), the longest expired: a, its head alone.
			// It is abandoned: a moves on. x and c stay out (a-2 too,
			// though a is retried).
			round(3, map[string]int{"a-1": 2, "b-1": 1, "x-1": 1}, gc, gx)
			// Every retry of round 3 moved on: the budget doubles, to 2.
			if r.retryBudget != 2 {
				t.Fatalf("after round 3, a retry budget of %d, want 2", r.retryBudget)
			}
			// a is back in the window; c and x are both retried: c has
			// nothing pending, dropped; x fails again, its second failure.
			round(4, map[string]int{"a-1": 2, "a-2": 1, "b-1": 1, "x-1": 2}, gx)
			if n := r.backoff[gx].fails; n != 2 {
				t.Errorf("x backs off after %d failures, want 2", n)
			}
			// A retry failed: the budget is back to Concurrency.
			if r.retryBudget != 1 {
				t.Fatalf("after round 4, a retry budget of %d, want 1", r.retryBudget)
			}
			// x's step has not ended: nothing is tried.
			round(5, map[string]int{"a-1": 2, "a-2": 1, "b-1": 1, "x-1": 2}, gx)
			var pending, abandoned int
			if err := db.QueryRowContext(ctx, `SELECT count(*) FROM seqby_outbox WHERE status = 'PENDING'`).Scan(&pending); err != nil {
				t.Fatal(err)
			}
			if err := db.QueryRowContext(ctx, `SELECT count(*) FROM seqby_outbox WHERE status = 'ABANDONED'`).Scan(&abandoned); err != nil {
				t.Fatal(err)
			}
			if pending != 1 || abandoned != 1 {
				t.Errorf("%d pending and %d abandoned, want x-1 pending and a-1 abandoned", pending, abandoned)
			}
		})
	}
}
