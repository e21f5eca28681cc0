package runtime

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seqby/seqby/runtime/internal/rdb"
)

// Retention: once every handler of a category has acked an entry, it is
// trimmed, on partition streams, backfill lanes and unpartitioned streams
// alike, so idle handled streams end empty; an entry a slow handler has
// not acked is kept, with everything after it.
func TestRetentionTrimsWhatEveryHandlerAcked(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	j := newJournal()
	orders := keyedHandler("orders", func(_ context.Context, e *testEvent) error {
		j.enter(e.Client, seqKey(e.Client, e.Seq))
		j.leave(e.Client, seqKey(e.Client, e.Seq), e.Seq, true)
		return nil
	})
	// slow does not finish a's third event until the test ends.
	inside, release := make(chan struct{}), make(chan struct{})
	slow := keyedHandler("slow", func(ctx context.Context, e *testEvent) error {
		if e.Client == "a" && e.Seq == 3 {
			close(inside)
			<-release
		}
		return nil
	})
	var mu sync.Mutex
	audited, noted := 0, 0
	audit := Registration{Name: "audit", Kind: EventHandler, Routes: []Route{orderRoute("Client", func(context.Context, *testEvent) error {
		mu.Lock()
		audited++
		mu.Unlock()
		return nil
	})}}
	notes := noteHandler("notes", func(context.Context, *testNote) error { mu.Lock(); noted++; mu.Unlock(); return nil })
	startEngine(t, c, fastOptions("r1"), orders, slow, audit, notes)
	t.Cleanup(func() { close(release) }) // runs before the engine's stop

	p := NewPublisher(c)
	const n = 10
	for i := 1; i <= n; i++ {
		for _, m := range []Message{ev("a", i), ev("b", i), &testNote{Text: "n"}} {
			if err := p.Publish(ctx, m); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := p.Publish(ctx, ev("b", n+1), AsBackfill()); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "everything handled", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return j.count("a") == n && j.count("b") == n+1 && audited == 2*n+1 && noted == n
	})
	streamA := rdb.PartitionStream("order", "a")
	for _, s := range []string{rdb.PartitionStream("order", "b"), rdb.BackfillStream("order", "b", DefaultBackfillSuffix), "note"} {
		eventually(t, 20*time.Second, s+" trimmed empty", func() bool { return c.XLen(ctx, s).Val() == 0 })
		if c.Exists(ctx, s).Val() != 1 {
			t.Fatalf("%s was deleted: a trimmed stream keeps its groups", s)
		}
	}
	// Retention runs when a handler acks: one more event of a, handled by
	// orders and audit while slow holds its third, trims a up to it.
	<-inside
	if err := p.Publish(ctx, ev("a", n+1)); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "a/11 handled", func() bool { return j.count("a") == n+1 })
	// Left: events 3 (slow's pending head) to 11.
	eventually(t, 20*time.Second, "a trimmed up to slow's pending entry", func() bool {
		left := c.XRange(ctx, streamA, "-", "+").Val()
		return len(left) == n-1 && strings.Contains(left[0].Values[rdb.FieldPayload].(string), `"seq":3`)
	})
}

// A handler that has never run starts from the entries retention kept
// (default), or with StartFromNew only from what is published after its
// first start.
func TestNewHandlerStart(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	p := NewPublisher(c)
	for i := 1; i <= 3; i++ {
		if err := p.Publish(ctx, ev("a", i)); err != nil {
			t.Fatal(err)
		}
	}
	jOld, jNew := newJournal(), newJournal()
	record := func(j *journal) func(context.Context, *testEvent) error {
		return func(_ context.Context, e *testEvent) error {
			j.enter(e.Client, seqKey(e.Client, e.Seq))
			j.leave(e.Client, seqKey(e.Client, e.Seq), e.Seq, true)
			return nil
		}
	}
	startEngine(t, c, fastOptions("s1"), keyedHandler("retained", record(jOld)))
	opts := fastOptions("s2")
	opts.NewHandlerStart = StartFromNew
	r := startEngine(t, c, opts, keyedHandler("fresh", record(jNew)))
	// Consuming, not Running: Running is true before Run has registered the
	// handler, and events published then predate its start.
	eventually(t, 10*time.Second, "fresh registered", func() bool { return r.Status().Consuming })
	for i := 4; i <= 5; i++ {
		if err := p.Publish(ctx, ev("a", i)); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 20*time.Second, "both handlers caught up", func() bool { return jOld.count("a") == 5 && jNew.count("a") == 2 })
	if got := jNew.seqs("a"); !slices.Equal(got, []int{4, 5}) {
		t.Fatalf("the StartFromNew handler applied %v, want [4 5]", got)
	}
	if got := jOld.seqs("a"); !slices.Equal(got, seq(5)) {
		t.Fatalf("the default handler applied %v, want 1..5", got)
	}
}

// A trim that keeps failing while reads succeed (here the category's
// groups hash holds a string) is retried about once per trimQuiet by an
// idle partition, not at every wake-up: with the first version of the
// quiet period (found in review) one idle partition logged some 2,000
// failed trims in two seconds.
func TestFailingTrimIsNotRetriedAtOnce(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	var logs syncBuffer
	var handled sync.WaitGroup
	handled.Add(1)
	opts := fastOptions("t1")
	opts.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	r := startEngine(t, c, opts, keyedHandler("orders", func(context.Context, *testEvent) error { handled.Done(); return nil }))
	eventually(t, 10*time.Second, "consuming", func() bool { return r.Status().Consuming })
	if err := c.Set(ctx, rdb.GroupsKey("order"), "x", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := NewPublisher(c).Publish(ctx, ev("a", 1)); err != nil {
		t.Fatal(err)
	}
	handled.Wait()
	failures := func() int { return strings.Count(logs.String(), "trimming acked entries failed") }
	eventually(t, 10*time.Second, "a failed trim", func() bool { return failures() > 0 })
	// Over the next two seconds about two more tries (one per trimQuiet,
	// a second), with a wide margin; a spinning worker makes hundreds.
	start, n0 := time.Now(), failures()
	for time.Since(start) < 2*time.Second {
		time.Sleep(100 * time.Millisecond)
	}
	if n := failures() - n0; n > 10 {
		t.Fatalf("an idle partition retried a failing trim %d times in 2s", n)
	}
}
