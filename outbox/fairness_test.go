package outbox_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seqby/seqby/outbox"
	"github.com/seqby/seqby/runtime"
)

// stuckPublisher fails every publish of the keys in stuck with a
// transient error (as a WRONGTYPE on the stream key or a NOPERM would),
// and publishes the others through p; it counts the attempts per key.
type stuckPublisher struct {
	p     *runtime.Publisher
	mu    sync.Mutex
	stuck map[string]bool
	tries map[string]int
}

func (s *stuckPublisher) PublishRecord(ctx context.Context, r runtime.Record) error {
	s.mu.Lock()
	stuck := s.stuck[r.Key]
	if s.tries == nil {
		s.tries = map[string]int{}
	}
	s.tries[r.Key]++
	s.mu.Unlock()
	if stuck {
		return fmt.Errorf("WRONGTYPE Operation against a key holding the wrong kind of value: %w", runtime.ErrPublish)
	}
	return s.p.PublishRecord(ctx, r)
}

func (s *stuckPublisher) set(key string, stuck bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stuck[key] = stuck
}

func (s *stuckPublisher) attempts(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tries[key]
}

// TestFailingPartitionDoesNotStarveOthers: a partition whose head keeps
// failing, with more records than a batch holds ahead of every other
// key's, does not hold the other keys up: they are all published while
// it stays pending; once it can be published, it is, in order.
func TestFailingPartitionDoesNotStarveOthers(t *testing.T) {
	dialects(t, func(t *testing.T, e *env) {
		const stuckN, otherN = 8, 12
		addOrders(t, e, []string{"stuck"}, stuckN)
		addOrders(t, e, []string{"c-1", "c-2"}, otherN/2)
		addOrders(t, e, []string{"c-3"}, otherN)
		sp := &stuckPublisher{p: e.pub, stuck: map[string]bool{"stuck": true}}
		e.relay(t, sp, outbox.RelayOptions{BatchSize: 5, Concurrency: 2})
		eventually(t, 20*time.Second, "the other keys' records published", func() bool {
			return len(e.stream(t, "order:{c-1}")) == otherN/2 && len(e.stream(t, "order:{c-2}")) == otherN/2 &&
				len(e.stream(t, "order:{c-3}")) == otherN
		})
		checkStreams(t, e, []string{"c-1", "c-2"}, otherN/2)
		checkStreams(t, e, []string{"c-3"}, otherN)
		if n := e.count(t, `SELECT count(*) FROM seqby_outbox WHERE status = 'PENDING' AND partition_key = 'stuck'`); n != stuckN {
			t.Fatalf("%d of stuck's records pending, want all %d", n, stuckN)
		}
		if len(e.stream(t, "order:{stuck}")) != 0 {
			t.Fatal("a record of stuck was stored although every publish of it failed")
		}
		// The failing head is retried (backing off), and goes through once
		// it can.
		eventually(t, 10*time.Second, "stuck retried", func() bool { return sp.attempts("stuck") >= 2 })
		sp.set("stuck", false)
		eventually(t, 40*time.Second, "stuck published", func() bool { return e.pending(t) == 0 })
		checkStreams(t, e, []string{"stuck"}, stuckN)
		if got := seqs(e.stream(t, "order:{stuck}")); !slices.Equal(got, upTo(stuckN)) {
			t.Errorf("stuck stream %v", got)
		}
	})
}

// holdPublisher fails the publishes of the message ids in hold with a
// transient error, and counts every attempt per message id.
type holdPublisher struct {
	p     *runtime.Publisher
	mu    sync.Mutex
	hold  map[string]bool
	tries map[string]int
}

func (h *holdPublisher) PublishRecord(ctx context.Context, r runtime.Record) error {
	h.mu.Lock()
	held := h.hold[r.MessageID]
	if h.tries == nil {
		h.tries = map[string]int{}
	}
	h.tries[r.MessageID]++
	h.mu.Unlock()
	if held {
		return fmt.Errorf("timeout: %w", runtime.ErrPublish)
	}
	return h.p.PublishRecord(ctx, r)
}

func (h *holdPublisher) release(id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.hold, id)
}

func (h *holdPublisher) attempts(id string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.tries[id]
}

// TestUnpartitionedOneGroupPerCategory: unpartitioned records of one
// category are one group whatever their partition_key and backfill
// columns say (hand-written rows may set them): they all go to the
// category's one stream, so a record with a stray key must not overtake
// an earlier one that keeps failing.
func TestUnpartitionedOneGroupPerCategory(t *testing.T) {
	dialects(t, func(t *testing.T, e *env) {
		ins := func(id, key string, backfill bool, seq int) {
			_, err := e.db.ExecContext(context.Background(), e.q(`INSERT INTO seqby_outbox
(message_id, category, partition_key, partitioned, backfill, type, payload) VALUES (?, 'note', ?, ?, ?, 'note', ?)`),
				id, key, false, backfill, []byte(fmt.Sprintf(`{"seq":%d}`, seq)))
			if err != nil {
				t.Fatal(err)
			}
		}
		ins("n-1", "", false, 1)
		ins("n-2", "junk", false, 2)
		ins("n-3", "", true, 3)
		ins("n-4", "", false, 4)
		hp := &holdPublisher{p: e.pub, hold: map[string]bool{"n-1": true}}
		e.relay(t, hp, outbox.RelayOptions{Concurrency: 4})
		eventually(t, 10*time.Second, "n-1 tried and failed three times", func() bool { return hp.attempts("n-1") >= 3 })
		if got := seqs(e.stream(t, "note")); len(got) != 0 {
			t.Fatalf("note stream %v while its first record fails: a later record overtook it", got)
		}
		hp.release("n-1")
		eventually(t, 20*time.Second, "every note published", func() bool { return e.pending(t) == 0 })
		if got := seqs(e.stream(t, "note")); !slices.Equal(got, upTo(4)) {
			t.Errorf("note stream %v, want [1 2 3 4]", got)
		}
	})
}

// TestUnpartitionedStrayKeySmallBatch: the fetch's window counts the
// unpartitioned records of a category as one partition, whatever their
// partition_key: with a batch of 2, n-1 and n-2 (key ”) are the batch,
// not n-1 and n-3 (key 'junk', the first of another SQL partition if the
// window split them by key), which would publish n-3 before n-2.
func TestUnpartitionedStrayKeySmallBatch(t *testing.T) {
	dialects(t, func(t *testing.T, e *env) {
		ins := func(id, key string, seq int) {
			_, err := e.db.ExecContext(context.Background(), e.q(`INSERT INTO seqby_outbox
(message_id, category, partition_key, partitioned, backfill, type, payload) VALUES (?, 'note', ?, ?, ?, 'note', ?)`),
				id, key, false, false, []byte(fmt.Sprintf(`{"seq":%d}`, seq)))
			if err != nil {
				t.Fatal(err)
			}
		}
		ins("n-1", "", 1)
		ins("n-2", "", 2)
		ins("n-3", "junk", 3)
		e.relay(t, e.pub, outbox.RelayOptions{BatchSize: 2})
		eventually(t, 10*time.Second, "every note published", func() bool { return e.pending(t) == 0 })
		if got := seqs(e.stream(t, "note")); !slices.Equal(got, upTo(3)) {
			t.Errorf("note stream %v, want [1 2 3]", got)
		}
	})
}

// prefixPublisher fails at once every publish of a key starting with
// "bad" (as a CLUSTERDOWN would) and publishes the others through p. It
// counts the failed attempts, and notes how many there had been when the
// first record of the key "good" was published.
type prefixPublisher struct {
	p         *runtime.Publisher
	mu        sync.Mutex
	failed    int
	goodAfter int
	goodSeen  bool
}

func (s *prefixPublisher) PublishRecord(ctx context.Context, r runtime.Record) error {
	s.mu.Lock()
	if strings.HasPrefix(r.Key, "bad") {
		s.failed++
		s.mu.Unlock()
		return fmt.Errorf("CLUSTERDOWN The cluster is down: %w", runtime.ErrPublish)
	}
	if r.Key == "good" && !s.goodSeen {
		s.goodSeen, s.goodAfter = true, s.failed
	}
	s.mu.Unlock()
	return s.p.PublishRecord(ctx, r)
}

// failedBeforeGood is how many failed attempts there were before the
// first publish of key "good".
func (s *prefixPublisher) failedBeforeGood() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.goodAfter
}

// addFailingAndGood adds 2 records of each of nbad keys "badNNN" (every
// key's first, then every key's second), then 5 of key "good", in one
// transaction.
func addFailingAndGood(t *testing.T, e *env, nbad int) {
	t.Helper()
	ctx := context.Background()
	tx, err := e.db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	for i := 1; i <= 2; i++ {
		for k := range nbad {
			if _, err := e.ob.Add(ctx, tx, &placed{Client: fmt.Sprintf("bad%03d", k), Seq: i}); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i := 1; i <= 5; i++ {
		if _, err := e.ob.Add(ctx, tx, &placed{Client: "good", Seq: i}); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

// TestManyFailingPartitionsDoNotStarveOthers: with far more failing
// partitions than a batch holds (250 keys, 2 records each, ahead of
// every record of key "good"; BatchSize 10, so the fetch window is 40
// records), every failing partition is left out of the window in SQL,
// however many there are, and good's records behind them are published.
func TestManyFailingPartitionsDoNotStarveOthers(t *testing.T) {
	dialects(t, func(t *testing.T, e *env) {
		const nbad = 250
		addFailingAndGood(t, e, nbad)
		pp := &prefixPublisher{p: e.pub}
		e.relay(t, pp, outbox.RelayOptions{BatchSize: 10, PollInterval: 50 * time.Millisecond})
		eventually(t, 30*time.Second, fmt.Sprintf("good published while %d partitions fail", nbad), func() bool {
			return len(e.stream(t, "order:{good}")) == 5
		})
		if got := seqs(e.stream(t, "order:{good}")); !slices.Equal(got, upTo(5)) {
			t.Errorf("good stream %v, want [1 2 3 4 5]", got)
		}
		if n := e.count(t, `SELECT count(*) FROM seqby_outbox WHERE status = 'PENDING' AND partition_key LIKE 'bad%'`); n != 2*nbad {
			t.Errorf("%d failing records pending, want all %d", n, 2*nbad)
		}
	})
}

// TestExpiredBackoffsDoNotCrowdTheWindow: a partition that failed stays
// out of the fetch window until it moves on, even once its backoff step
// has ended; it is then retried (its head only) with at most Concurrency
// others per round. So the healthy key behind 30 failing keys (BatchSize
// 10: their heads fill three rounds) is published in the fourth round,
// after at most 30 first attempts plus Concurrency retries per round,
// however short the backoff: with PollInterval 1ns every step has ended
// by the next round, and a relay that put expired partitions back into
// the window would retry the first ten heads round after round, the
// healthy key waiting until their steps outgrow a round.
func TestExpiredBackoffsDoNotCrowdTheWindow(t *testing.T) {
	dialects(t, func(t *testing.T, e *env) {
		const nbad, batch, conc = 30, 10, 2
		addFailingAndGood(t, e, nbad)
		pp := &prefixPublisher{p: e.pub}
		e.relay(t, pp, outbox.RelayOptions{BatchSize: batch, Concurrency: conc, PollInterval: time.Nanosecond,
			LeaseTTL: 30 * time.Second})
		eventually(t, 30*time.Second, "good published", func() bool {
			return len(e.stream(t, "order:{good}")) == 5
		})
		if got := seqs(e.stream(t, "order:{good}")); !slices.Equal(got, upTo(5)) {
			t.Errorf("good stream %v, want [1 2 3 4 5]", got)
		}
		// Rounds 1 to 3 each fail ten new heads and retry at most conc
		// expired partitions; round 4 publishes good (its retries run
		// alongside).
		rounds := nbad/batch + 1
		if n, most := pp.failedBeforeGood(), nbad+rounds*conc; n > most {
			t.Errorf("good first published after %d failed attempts of the failing keys, want at most %d (%d first attempts, %d retries in each of %d rounds)",
				n, most, nbad, conc, rounds)
		}
		if n := e.count(t, `SELECT count(*) FROM seqby_outbox WHERE status = 'PENDING' AND partition_key LIKE 'bad%'`); n != 2*nbad {
			t.Errorf("%d failing records pending, want all %d", n, 2*nbad)
		}
	})
}
