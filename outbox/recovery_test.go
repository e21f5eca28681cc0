package outbox

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seqby/seqby/runtime"
)

// switchPublisher fails every publish with a transient error while down,
// or while the record's key starts with "bad" (as a CLUSTERDOWN would),
// and the first publish of each key in blip; it records, per key, the
// seqs published (from the record's payload) and counts the attempts.
type switchPublisher struct {
	mu        sync.Mutex
	down      bool
	blip      map[string]bool
	attempts  int
	published map[string][]string
}

func (s *switchPublisher) PublishRecord(ctx context.Context, r runtime.Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.attempts++
	if s.down || strings.HasPrefix(r.Key, "bad") {
		return fmt.Errorf("CLUSTERDOWN: %w", runtime.ErrPublish)
	}
	if s.blip[r.Key] {
		delete(s.blip, r.Key)
		return fmt.Errorf("one timeout: %w", runtime.ErrPublish)
	}
	if s.published == nil {
		s.published = map[string][]string{}
	}
	s.published[r.Key] = append(s.published[r.Key], r.MessageID)
	return nil
}

func (s *switchPublisher) setDown(down bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.down = down
}

func (s *switchPublisher) of(key string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.published[key])
}

// TestPickDue: when more partitions are due than the retry budget, half
// of it goes to those whose step ended longest ago, the rest to those
// with the fewest consecutive failures (longest expired first among
// equals); an odd budget's odd slot alternates between the halves. Every
// partition with an entry is skipped by the fetch, due or not.
func TestPickDue(t *testing.T) {
	now := time.Now()
	r := &Relay{opts: RelayOptions{Concurrency: 4}, backoff: map[group]*partBackoff{}}
	r.retryBudget = 4
	g := func(k string) group { return group{partitioned: true, category: "c", key: k} }
	// old0..old5: failing for good, expired 10s..5s ago; blip0..blip2:
	// one failure each, expired 3s..1s ago; later: not due.
	for i := range 6 {
		r.backoff[g(fmt.Sprint("old", i))] = &partBackoff{fails: 20, until: now.Add(time.Duration(i-10) * time.Second)}
	}
	for i := range 3 {
		r.backoff[g(fmt.Sprint("blip", i))] = &partBackoff{fails: 1, until: now.Add(time.Duration(i-3) * time.Second)}
	}
	r.backoff[g("later")] = &partBackoff{fails: 1, until: now.Add(time.Hour)}
	keys := func(gs []group) string {
		var ks []string
		for _, g := range gs {
			ks = append(ks, g.key)
		}
		return strings.Join(ks, " ")
	}
	skip, due := r.pickDue(now)
	if len(skip) != 10 {
		t.Errorf("%d partitions skipped, want all 10", len(skip))
	}
	if got, want := keys(due), "old0 old1 blip0 blip1"; got != want {
		t.Errorf("retried %q, want %q", got, want)
	}
	// A budget with room for every due partition retries them all.
	r.retryBudget = 9
	if _, due := r.pickDue(now); len(due) != 9 {
		t.Errorf("budget 9: retried %q, want the 9 due", keys(due))
	}
	// A budget of 1: the slot alternates.
	r.opts.Concurrency, r.retryBudget = 1, 1
	var got []string
	for range 2 {
		_, due := r.pickDue(now)
		got = append(got, keys(due))
	}
	slices.Sort(got)
	if want := []string{"blip0", "old0"}; !slices.Equal(got, want) {
		t.Errorf("budget 1, two rounds: retried %q, want %q", got, want)
	}
}

// TestOutageRecoveryRounds: after an outage in which every one of 2,000
// pending partitions failed (each has a backoff entry), they come back
// in a few rounds, the retry budget doubling while every retry goes
// through, not in 2,000/Concurrency rounds of Concurrency retries each
// (250). Every round of the recovery reports more work, so the relay
// never waits PollInterval (an hour here) with records pending; a record
// added after the outage to a key still backing off is published after
// that key's older one.
func TestOutageRecoveryRounds(t *testing.T) {
	for _, d := range []Dialect{SQLite, Postgres} {
		t.Run(d.String(), func(t *testing.T) {
			const keys, most = 2000, 20
			ctx := context.Background()
			sp := &switchPublisher{}
			db, r, l := leadingRelay(t, d, sp, RelayOptions{PollInterval: time.Hour})
			addKeys(t, db, d, keys, "k%04d", true)
			// The outage, over: every partition failed once (the rounds
			// are not run: 20 of them would only slow the test), and every
			// step has ended.
			for k := range keys {
				g := group{partitioned: true, category: "fence", key: fmt.Sprintf("k%04d", k)}
				r.backoff[g] = &partBackoff{fails: 1, until: time.Now().Add(-time.Second)}
			}
			if _, err := New(Options{Dialect: d}).Add(ctx, db, &fenceMsg{K: "k0399"}, runtime.WithMessageID("k0399-2")); err != nil {
				t.Fatal(err)
			}
			rounds := 0
			for {
				if ok, err := r.renew(ctx, l); !ok || err != nil {
					t.Fatalf("renew: %v, %v", ok, err)
				}
				more, err := r.round(ctx, l)
				if err != nil {
					t.Fatal(err)
				}
				rounds++
				var pending int
				if err := db.QueryRowContext(ctx, `SELECT count(*) FROM seqby_outbox WHERE status = 'PENDING'`).Scan(&pending); err != nil {
					t.Fatal(err)
				}
				if pending == 0 {
					break
				}
				if !more {
					t.Fatalf("round %d of the recovery reports no more work with %d records pending: the relay would wait PollInterval", rounds, pending)
				}
				if rounds >= most {
					t.Fatalf("%d rounds after the outage, %d of %d partitions still pending, want all published within %d rounds (Concurrency %d)",
						rounds, pending, keys, most, r.opts.Concurrency)
				}
			}
			t.Logf("%d partitions recovered in %d rounds (Concurrency %d, BatchSize %d)", keys, rounds, r.opts.Concurrency, r.opts.BatchSize)
			if got := sp.of("k0399"); !slices.Equal(got, []string{"k0399-1", "k0399-2"}) {
				t.Errorf("k0399 published %v, want [k0399-1 k0399-2]", got)
			}
			if len(r.backoff) != 0 {
				t.Errorf("%d partitions still back off", len(r.backoff))
			}
		})
	}
}

// TestBlipNotBehindFailingBacklog: a healthy key whose publish fails once
// (a timeout) is retried as soon as its step ends, not behind 200
// partitions failing for good whose steps ended earlier (at Concurrency 2
// per round, 100 rounds): with a retry budget of 2, one retry goes to the
// longest expired, one to the fewest failures. Round 1 fails good's first
// record; round 2 retries it (published); round 3 publishes its second.
func TestBlipNotBehindFailingBacklog(t *testing.T) {
	for _, d := range []Dialect{SQLite, Postgres} {
		t.Run(d.String(), func(t *testing.T) {
			const bad, most = 200, 3
			ctx := context.Background()
			sp := &switchPublisher{blip: map[string]bool{"good": true}}
			// PollInterval 1ns: every step (even the 20th, 2^19 ns) ends
			// by the next round.
			db, r, l := leadingRelay(t, d, sp, RelayOptions{PollInterval: time.Nanosecond, Concurrency: 2})
			addKeys(t, db, d, bad, "bad%03d", false)
			for n := 0; len(r.backoff) < bad; n++ {
				if n > bad/r.opts.BatchSize {
					t.Fatalf("after %d rounds, %d partitions back off, want %d", n, len(r.backoff), bad)
				}
				if _, err := r.round(ctx, l); err != nil {
					t.Fatal(err)
				}
			}
			// A partial outage's steady state: every bad key at its 20th
			// failure, all due.
			for _, b := range r.backoff {
				b.fails, b.until = 20, time.Now().Add(-time.Second)
			}
			for _, id := range []string{"good-1", "good-2"} {
				if _, err := New(Options{Dialect: d}).Add(ctx, db, &fenceMsg{K: "good"}, runtime.WithMessageID(id)); err != nil {
					t.Fatal(err)
				}
			}
			rounds := 0
			for len(sp.of("good")) < 2 {
				if rounds >= most {
					t.Fatalf("after %d rounds, good published %v, want both of its records within %d rounds (%d failing partitions due, Concurrency %d)",
						rounds, sp.of("good"), most, bad, r.opts.Concurrency)
				}
				if _, err := r.round(ctx, l); err != nil {
					t.Fatal(err)
				}
				rounds++
			}
			if got := sp.of("good"); !slices.Equal(got, []string{"good-1", "good-2"}) {
				t.Errorf("good published %v, want [good-1 good-2]", got)
			}
		})
	}
}

// TestNoImmediateRoundsWithoutProgress: a round goes again at once only
// when something moved on. With Redis down, 1,000 pending partitions
// and a full batch of 100 that all fail, the relay waits PollInterval
// after the first round, instead of going through the whole backlog in
// 10 immediate rounds of 100 failed publishes each. Once Redis is back,
// a full batch that publishes reports more work, a batch not full does
// not, and a round whose only progress is retried partitions moving on
// (no batch) does: the failed partitions drain without a round reporting
// no more work while records are pending.
func TestNoImmediateRoundsWithoutProgress(t *testing.T) {
	for _, d := range []Dialect{SQLite, Postgres} {
		t.Run(d.String(), func(t *testing.T) {
			const keys = 1000
			ctx := context.Background()
			sp := &switchPublisher{down: true}
			db, r, l := leadingRelay(t, d, sp, RelayOptions{PollInterval: time.Hour})
			addKeys(t, db, d, keys, "k%04d", false)
			pending := func() int {
				var n int
				if err := db.QueryRowContext(ctx, `SELECT count(*) FROM seqby_outbox WHERE status = 'PENDING'`).Scan(&n); err != nil {
					t.Fatal(err)
				}
				return n
			}
			// Rounds back to back while a round says more work waits.
			var err error
			immediate := 0
			for more := true; more; immediate++ {
				if immediate > keys/r.opts.BatchSize {
					t.Fatalf("%d immediate rounds with every publish failing", immediate)
				}
				if more, err = r.round(ctx, l); err != nil {
					t.Fatal(err)
				}
			}
			sp.mu.Lock()
			attempts := sp.attempts
			sp.mu.Unlock()
			if immediate != 1 || attempts != r.opts.BatchSize {
				t.Fatalf("with every publish failing, %d rounds back to back and %d failed publishes, want 1 round of %d (then PollInterval)",
					immediate, attempts, r.opts.BatchSize)
			}
			sp.setDown(false)
			// The 100 failed partitions' steps (an hour) have not ended: a
			// full batch of others publishes, and more waits.
			more, err := r.round(ctx, l)
			if err != nil {
				t.Fatal(err)
			}
			if !more {
				t.Fatal("a full batch that published reports no more work")
			}
			// The rest of the window drains; its last round, a batch not
			// full, reports no more work: only the failed partitions are
			// left, their steps not ended.
			for rounds := 1; more; rounds++ {
				if rounds > keys/r.opts.BatchSize {
					t.Fatal("the window does not drain")
				}
				if more, err = r.round(ctx, l); err != nil {
					t.Fatal(err)
				}
			}
			if n := pending(); n != r.opts.BatchSize || len(r.backoff) != n {
				t.Fatalf("%d records pending and %d partitions backing off, want the %d that failed", n, len(r.backoff), r.opts.BatchSize)
			}
			// Their steps end: a round of retries alone (no batch) that go
			// through reports more work, and so on until none is left.
			for _, b := range r.backoff {
				b.until = time.Now().Add(-time.Second)
			}
			for rounds := 1; pending() > 0; rounds++ {
				if rounds > keys {
					t.Fatal("the backlog does not drain")
				}
				if more, err = r.round(ctx, l); err != nil {
					t.Fatal(err)
				}
				if !more && pending() > 0 {
					t.Fatalf("a round of retries that went through reports no more work with %d records pending", pending())
				}
			}
			if len(r.backoff) != 0 {
				t.Errorf("%d partitions still back off", len(r.backoff))
			}
		})
	}
}

// TestGroupSetMatchesOddKeys: the exclusion (fetch) and the retry
// (fetchHeads) match every partition exactly as groupOf groups its
// records, whatever its key holds: quotes, backslashes, markup, non-ASCII,
// digits, the empty key, spaces, and on SQLite (whose TEXT holds any
// bytes; PostgreSQL's holds valid UTF-8 without NUL only) invalid UTF-8
// and a NUL, which JSON cannot carry as they are (json.Marshal turns
// invalid UTF-8 into U+FFFD: such a partition escaped the exclusion and
// took room in the window). Each key has a record in each lane, and an
// unpartitioned category has records with stray key and lane columns.
func TestGroupSetMatchesOddKeys(t *testing.T) {
	for _, d := range []Dialect{SQLite, Postgres} {
		t.Run(d.String(), func(t *testing.T) {
			ctx := context.Background()
			db, r, _ := leadingRelay(t, d, &switchPublisher{}, RelayOptions{})
			ins := func(id, cat, key string, partitioned, backfill bool) {
				t.Helper()
				if _, err := db.ExecContext(ctx, r.d.rebind(`INSERT INTO seqby_outbox
(message_id, category, partition_key, partitioned, backfill, type, payload) VALUES (?, ?, ?, ?, ?, 't', ?)`),
					id, cat, key, partitioned, backfill, []byte(`{}`)); err != nil {
					t.Fatalf("insert %s: %v", id, err)
				}
			}
			keys := []string{`q"uo\te`, "<>&", "é✓", "123", "", " sp ", "a'b"}
			if d == SQLite {
				keys = append(keys, "\xff\xfe", "nul\x00x")
			}
			var skip []group
			for i, k := range keys {
				ins(fmt.Sprintf("p%d", i), "c", k, true, false)
				ins(fmt.Sprintf("b%d", i), "c", k, true, true)
				skip = append(skip, group{partitioned: true, category: "c", key: k},
					group{partitioned: true, backfill: true, category: "c", key: k})
			}
			ins("u1", "note", "", false, false)
			ins("u2", "note", "junk", false, true)
			skip = append(skip, group{category: "note"})
			// Partitions outside the set are not matched.
			want := []string{"o1"}
			ins("o1", "c", "zz", true, false)
			if d == SQLite {
				ins("o2", "c", "\xff", true, false)
				want = append(want, "o2")
			}
			ids := func(ps []pending) []string {
				var out []string
				for _, p := range ps {
					out = append(out, p.MessageID)
				}
				return out
			}
			recs, err := r.fetch(ctx, skip)
			if err != nil {
				t.Fatal(err)
			}
			if got := ids(recs); !slices.Equal(got, want) {
				t.Errorf("fetch leaving out every partition but %v read %q", want, got)
			}
			heads, err := r.fetchHeads(ctx, skip)
			if err != nil {
				t.Fatal(err)
			}
			var wantHeads []string
			for i := range keys {
				wantHeads = append(wantHeads, fmt.Sprintf("p%d", i), fmt.Sprintf("b%d", i))
			}
			wantHeads = append(wantHeads, "u1")
			if got := ids(heads); !slices.Equal(got, wantHeads) {
				t.Errorf("fetchHeads of %d partitions read %q, want %q", len(skip), got, wantHeads)
			}
		})
	}
}

// addKeys adds one record of each of n keys, named by format from 0 up, in
// one transaction; withID gives the record of key K the message id "K-1".
func addKeys(t *testing.T, db *sql.DB, d Dialect, n int, format string, withID bool) {
	t.Helper()
	ctx := context.Background()
	ob := New(Options{Dialect: d})
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	for k := range n {
		key := fmt.Sprintf(format, k)
		var opts []runtime.PublishOption
		if withID {
			opts = append(opts, runtime.WithMessageID(key+"-1"))
		}
		if _, err := ob.Add(ctx, tx, &fenceMsg{K: key}, opts...); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}
