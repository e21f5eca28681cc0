package runtime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seqby/seqby/internal/logsink"
	"github.com/seqby/seqby/runtime/inspect"
	"github.com/seqby/seqby/runtime/internal/rdb"
	"github.com/seqby/seqby/runtime/internal/telemetry/telemetrytest"
)

// The guarantee on the recovery paths (issue #23): a halted head's slow
// retry, an operator's resolve, handovers of a halted partition, and two
// processes given one OwnerID.

// fenceWatch records attempts that started while the lease in Redis held
// another owner's token: the fence rule broken.
type fenceWatch struct {
	c          redis.UniversalClient
	mu         sync.Mutex
	violations []string
}

// check is called first thing in a handler attempt.
func (w *fenceWatch) check(ctx context.Context, what string) {
	li, ok := LeaseFromContext(ctx)
	if !ok {
		return
	}
	cur, _ := w.c.Get(context.Background(), li.LeaseKey).Result()
	// An empty lease is a deletion racing this read; another token is an
	// attempt under a lost lease.
	if cur != "" && cur != li.Token {
		w.mu.Lock()
		w.violations = append(w.violations, fmt.Sprintf("%s started under %s while the lease holds %s", what, li.Token, cur))
		w.mu.Unlock()
	}
}

func (w *fenceWatch) failIf(t *testing.T) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.violations) > 0 {
		t.Fatalf("attempts started on a lost lease: %v", w.violations)
	}
}

// ownsToken reports whether r owns a partition under token.
func ownsToken(r *running, token string) bool {
	for _, p := range r.Status().Partitions {
		if p.Token == token {
			return true
		}
	}
	return false
}

// Finding 1: a halted head retried from memory starts only after its lease
// is confirmed in Redis. The halting owner's lease is deleted (an eviction,
// a failover) while it waits to retry, with its heartbeat far off; another
// engine takes the key over and runs e1..e3; the halting owner's retry
// timer fires many times before its heartbeat would notice, and none of
// those retries may start.
func TestHaltedRetryFromMemoryIsFenced(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	w := &fenceWatch{c: c}
	j := newJournal()
	var halting atomic.Value // the token that halted: e1 fails under it only
	halting.Store("")
	gone := make(chan struct{})
	h := keyedHandler("rec", func(ctx context.Context, e *testEvent) error {
		li, _ := LeaseFromContext(ctx)
		name := seqKey(e.Client, e.Seq)
		w.check(ctx, name)
		fail := e.Seq == 1 && (halting.Load() == "" || halting.Load() == li.Token)
		j.enter(e.Client, name)
		defer j.leave(e.Client, name, e.Seq, !fail)
		if fail {
			halting.Store(li.Token)
			return errPoison
		}
		if e.Seq == 2 {
			// Hold e2 until the halting owner has left, so a retry of e1
			// it started meanwhile would overlap it.
			select {
			case <-gone:
			case <-time.After(20 * time.Second):
			}
		}
		return nil
	})
	opts := fastOptions("o")
	opts.LeaseTTL, opts.HeartbeatInterval, opts.LeaseMargin = 10*time.Second, 4*time.Second, time.Second
	opts.Retry.MaxRetries, opts.Retry.HaltedRetryInterval = -1, 100*time.Millisecond
	o := startEngine(t, c, opts, h)
	p := NewPublisher(c)
	for i := 1; i <= 3; i++ {
		if err := p.Publish(ctx, ev("a", i)); err != nil {
			t.Fatal(err)
		}
	}
	waitHalts(t, c, "rec", 1)
	token := halting.Load().(string)
	if err := c.Del(ctx, rdb.LeaseKey(rdb.PartitionStream("order", "a"), "rec")).Err(); err != nil {
		t.Fatal(err)
	}
	nOpts := opts
	nOpts.OwnerID = "n"
	startEngine(t, c, nOpts, h)
	eventually(t, 20*time.Second, "the halting owner leaves the partition", func() bool { return !ownsToken(o, token) })
	close(gone)
	eventually(t, 20*time.Second, "a's events applied", func() bool { return j.count("a") >= 3 })
	w.failIf(t)
	if len(j.overlap) > 0 {
		t.Fatalf("events of one key ran at once: %v", j.overlap)
	}
	// e1 failed under the halting token, then ran under the new owner.
	if got := j.seqs("a"); !slices.Equal(got, []int{1, 2, 3}) {
		t.Fatalf("a applied %v, want [1 2 3]", got)
	}
}

// Finding 2 and finding 10: an operator's skip is refused while the
// halting owner runs a retry of the head, so the next owner never runs e2
// beside it; once the retry is over the skip goes through, and the halting
// owner reports it as a resolution, not as a lost lease.
func TestResolveExcludesTheHaltedOwnersRetry(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	w := &fenceWatch{c: c}
	j := newJournal()
	var slow atomic.Bool
	inRetry := make(chan struct{}, 1)
	release := make(chan struct{})
	h := keyedHandler("res", func(ctx context.Context, e *testEvent) error {
		name := seqKey(e.Client, e.Seq)
		w.check(ctx, name)
		j.enter(e.Client, name)
		defer j.leave(e.Client, name, e.Seq, e.Seq != 1)
		if e.Seq != 1 {
			return nil
		}
		if slow.Load() {
			select {
			case inRetry <- struct{}{}:
			default:
			}
			select {
			case <-release:
			case <-time.After(20 * time.Second):
			}
		}
		return errPoison
	})
	type instance struct {
		r    *running
		logs *logsink.Buffer
		m    *telemetrytest.Reader
	}
	start := func(owner string) instance {
		logs := &logsink.Buffer{}
		m, mp := newMetricsReader(t)
		opts := fastOptions(owner)
		opts.LeaseTTL, opts.HeartbeatInterval, opts.LeaseMargin = 10*time.Second, 4*time.Second, time.Second
		opts.Retry.MaxRetries, opts.Retry.HaltedRetryInterval = -1, 100*time.Millisecond
		opts.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
		opts.MeterProvider = mp
		return instance{startEngine(t, c, opts, h), logs, m}
	}
	engines := map[string]instance{"o1": start("o1"), "o2": start("o2")}
	p := NewPublisher(c)
	for i := 1; i <= 3; i++ {
		if err := p.Publish(ctx, ev("a", i)); err != nil {
			t.Fatal(err)
		}
	}
	r := waitHalts(t, c, "res", 1)[0]
	halted := engines[r.Owner]
	slow.Store(true)
	<-inRetry
	in := inspect.New(c)
	if _, err := in.CheckSkip(ctx, "res", r.Partition, r.EntryID); !errors.Is(err, inspect.ErrRetrying) {
		t.Errorf("dry run of a skip while the halted owner retries the head: %v, want inspect.ErrRetrying", err)
	}
	_, err := in.Skip(ctx, "res", r.Partition, r.EntryID)
	if !errors.Is(err, inspect.ErrRetrying) {
		t.Errorf("skip while the halted owner retries the head: %v, want inspect.ErrRetrying", err)
	}
	if err == nil {
		// The old fault: the other engine takes the key and runs e2
		// beside the retry. Give it the chance before the retry ends.
		eventually(t, 20*time.Second, "e2 applied after the accepted skip", func() bool { return j.count("a") >= 1 })
	}
	slow.Store(false)
	close(release)
	if err != nil {
		eventually(t, 20*time.Second, "the skip goes through between retries", func() bool {
			_, err := in.Skip(ctx, "res", r.Partition, r.EntryID)
			if err != nil && !errors.Is(err, inspect.ErrRetrying) {
				t.Fatalf("skip: %v", err)
			}
			return err == nil
		})
	}
	eventually(t, 20*time.Second, "a continues after its head", func() bool { return j.count("a") >= 2 })
	w.failIf(t)
	if len(j.overlap) > 0 {
		t.Fatalf("events of one key ran at once: %v", j.overlap)
	}
	if got := j.seqs("a"); !slices.Equal(got, []int{2, 3}) {
		t.Fatalf("a applied %v, want [2 3]", got)
	}
	eventually(t, 20*time.Second, "the halted owner reports the resolution", func() bool {
		return strings.Contains(halted.logs.String(), "halt resolved by operator")
	})
	if logs := halted.logs.String(); strings.Contains(logs, "lease lost") {
		t.Errorf("the halted owner logged an operator's resolve as a lost lease:\n%s", logs)
	}
	if v, _ := halted.m.Value("seqby.partitions.resolved"); v != 1 {
		t.Errorf("seqby.partitions.resolved = %v, want 1", v)
	}
	if v, _ := halted.m.Value("seqby.lease.lost"); v != 0 {
		t.Errorf("seqby.lease.lost = %v after an operator's resolve, want 0", v)
	}
}

// Finding 3: handovers of a partition halted by a transient error never
// turn the halt permanent: eleven graceful stops, each by an owner that
// halted on the head, then the error clears and the head runs.
func TestHandoversOfAHaltedHeadAddNoDeliveries(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	j := newJournal()
	var outage atomic.Bool
	outage.Store(true)
	h := keyedHandler("ho", func(ctx context.Context, e *testEvent) error {
		if e.Seq == 1 && outage.Load() {
			return errors.New("downstream unavailable")
		}
		name := seqKey(e.Client, e.Seq)
		j.enter(e.Client, name)
		j.leave(e.Client, name, e.Seq, true)
		return nil
	})
	opts := func(i int) Options {
		o := fastOptions(fmt.Sprintf("h%d", i))
		o.Retry.MaxRetries, o.Retry.HaltedRetryInterval = -1, time.Hour // MaxDeliveries: the default 10
		return o
	}
	p := NewPublisher(c)
	for i := 1; i <= 3; i++ {
		if err := p.Publish(ctx, ev("a", i)); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 11 {
		r := startEngine(t, c, opts(i), h)
		eventually(t, 20*time.Second, fmt.Sprintf("owner %d halts on the head", i), func() bool {
			st := r.Status()
			return len(st.Partitions) == 1 && st.Partitions[0].Halted
		})
		if st := r.Status(); st.Partitions[0].Halt.Permanent {
			t.Fatalf("owner %d halted permanently: %+v", i, st.Partitions[0].Halt)
		}
		r.stop()
	}
	outage.Store(false)
	last := opts(11)
	last.Retry.HaltedRetryInterval = 50 * time.Millisecond
	startEngine(t, c, last, h)
	eventually(t, 20*time.Second, "the key completes once the error clears", func() bool { return j.count("a") == 3 })
	if got := j.seqs("a"); !slices.Equal(got, []int{1, 2, 3}) {
		t.Fatalf("a applied %v, want [1 2 3]", got)
	}
}

// Finding 4: a second live process with the same OwnerID is refused at
// start, and never runs a partition the first holds.
func TestSameOwnerIDIsRefused(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	j := newJournal()
	var second atomic.Int64
	handler := func(mark bool) Registration {
		return keyedHandler("id", func(ctx context.Context, e *testEvent) error {
			if mark {
				second.Add(1)
			}
			name := seqKey(e.Client, e.Seq)
			j.enter(e.Client, name)
			defer j.leave(e.Client, name, e.Seq, true)
			time.Sleep(time.Millisecond) // a body that takes a moment, for overlaps to show
			return nil
		})
	}
	first := startEngine(t, c, fastOptions("w1"), handler(false))
	p := NewPublisher(c)
	for i := 1; i <= 20; i++ {
		for _, k := range []string{"a", "b", "c"} {
			if err := p.Publish(ctx, ev(k, i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	eventually(t, 20*time.Second, "the first engine owns the keys", func() bool { return len(first.Status().Partitions) == 3 })
	e, err := NewEngine(c, fastOptions("w1"))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Register(handler(true)); err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	err = e.Run(rctx)
	if !errors.Is(err, ErrOwnerInUse) {
		t.Errorf("Run of a second engine with OwnerID w1: %v, want ErrOwnerInUse", err)
	}
	eventually(t, 20*time.Second, "every event applied", func() bool {
		return j.count("a") == 20 && j.count("b") == 20 && j.count("c") == 20
	})
	if n := second.Load(); n != 0 {
		t.Errorf("the refused engine ran %d attempts", n)
	}
	if len(j.overlap) > 0 {
		t.Fatalf("events of one key ran at once: %v", j.overlap)
	}
	for _, k := range []string{"a", "b", "c"} {
		if got := j.seqs(k); !inOrder(got, 20) {
			t.Fatalf("%s applied %v", k, got)
		}
	}
}
