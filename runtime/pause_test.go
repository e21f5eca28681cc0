package runtime

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seqby/seqby/internal/redistest"
	"github.com/seqby/seqby/runtime/inspect"
	"github.com/seqby/seqby/runtime/internal/lease"
	"github.com/seqby/seqby/runtime/internal/rdb"
)

// pauseScene is a keyed handler whose events of one key can be held in
// the handler (hold), recording what entered it per key.
type pauseScene struct {
	t       *testing.T
	c       *redis.Client
	ctx     context.Context
	j       *journal
	mu      sync.Mutex
	entered map[string][]int
	hold    map[string]chan struct{} // seqKey -> released when closed
}

func newPauseScene(t *testing.T) *pauseScene {
	c, ctx := newRedis(t), ctxT(t)
	return &pauseScene{t: t, c: c, ctx: ctx, j: newJournal(), entered: map[string][]int{}, hold: map[string]chan struct{}{}}
}

// handler is the scene's registration, named name.
func (s *pauseScene) handler(name string) Registration {
	return keyedHandler(name, func(_ context.Context, e *testEvent) error {
		k := seqKey(e.Client, e.Seq)
		s.mu.Lock()
		s.entered[e.Client] = append(s.entered[e.Client], e.Seq)
		h := s.hold[k]
		s.mu.Unlock()
		s.j.enter(e.Client, k)
		if h != nil {
			<-h
		}
		s.j.leave(e.Client, k, e.Seq, true)
		return nil
	})
}

// holdAt makes event seq of client wait in the handler until the
// returned release is called.
func (s *pauseScene) holdAt(client string, seq int) (release func()) {
	ch := make(chan struct{})
	s.mu.Lock()
	s.hold[seqKey(client, seq)] = ch
	s.mu.Unlock()
	var once sync.Once
	release = func() { once.Do(func() { close(ch) }) }
	s.t.Cleanup(release)
	return release
}

func (s *pauseScene) enteredOf(client string) []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.entered[client])
}

func (s *pauseScene) publish(client string, from, to int) {
	s.t.Helper()
	p := NewPublisher(s.c)
	for i := from; i <= to; i++ {
		if err := p.Publish(s.ctx, ev(client, i)); err != nil {
			s.t.Fatal(err)
		}
	}
}

// pausedHere reports whether e's status shows stream paused.
func pausedHere(e *Engine, stream string) bool {
	for _, p := range e.Status().Paused() {
		if p.Stream == stream {
			return true
		}
	}
	return false
}

// A pause stored while an event of the key is in the handler lets that
// event finish and starts no later one (other keys go on), shows in
// Status, Health (still ready) and Partitions; Resume wakes the owner,
// which goes on in order.
func TestPauseStopsAKeyUntilResumed(t *testing.T) {
	s := newPauseScene(t)
	e := startEngine(t, s.c, fastOptions("o1"), s.handler("pz"))
	release := s.holdAt("a", 2)
	s.publish("a", 1, 5)
	eventually(t, 20*time.Second, "a/2 in the handler", func() bool { return len(s.enteredOf("a")) == 2 })
	in := inspect.New(s.c)
	p, err := in.Pause(s.ctx, "pz", "order:{a}", "alice")
	if err != nil || p.Already || p.By != "alice" || p.Mark != "order:{a}:__lease__:pz:__meta__" {
		t.Fatalf("Pause: %+v, %v", p, err)
	}
	release()
	eventually(t, 20*time.Second, "the owner to find a paused", func() bool { return pausedHere(e.Engine, "order:{a}") })
	s.publish("b", 1, 3)
	eventually(t, 20*time.Second, "b to run past a's pause", func() bool { return s.j.count("b") == 3 })
	if got := s.enteredOf("a"); !slices.Equal(got, []int{1, 2}) {
		t.Fatalf("a entered %v while paused, want [1 2] (2 was in flight)", got)
	}
	if s.j.count("a") != 2 {
		t.Fatalf("a applied %v, want the in-flight event finished", s.j.seqs("a"))
	}
	h := e.Health(s.ctx)
	if !h.Ready || !slices.ContainsFunc(h.Reasons, func(r string) bool { return strings.Contains(r, "paused: partition a of handler pz") }) {
		t.Fatalf("health %+v, want ready with a paused reason", h)
	}
	parts, err := in.Partitions(s.ctx, "pz")
	if err != nil {
		t.Fatal(err)
	}
	for _, pi := range parts {
		if pi.Paused != (pi.Key == "a") {
			t.Fatalf("partitions: %+v, want only a paused", parts)
		}
	}
	if ps, err := in.Paused(s.ctx, ""); err != nil || len(ps) != 1 || ps[0].Partition != "order:{a}" || ps[0].By != "alice" {
		t.Fatalf("Paused: %+v, %v", ps, err)
	}
	if again, err := in.Pause(s.ctx, "pz", "order:{a}", "bob"); err != nil || !again.Already || again.By != "alice" {
		t.Fatalf("a second Pause: %+v, %v, want the first pause in force", again, err)
	}
	if _, err := in.Resume(s.ctx, "pz", "order:{a}"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "a to go on after Resume", func() bool { return s.j.count("a") == 5 })
	if got := s.j.seqs("a"); !slices.Equal(got, []int{1, 2, 3, 4, 5}) {
		t.Fatalf("a applied %v, want 1..5 in order", got)
	}
	if len(s.j.overlap) > 0 {
		t.Fatalf("overlaps: %v", s.j.overlap)
	}
	if _, err := in.Resume(s.ctx, "pz", "order:{a}"); !errors.Is(err, inspect.ErrNotPaused) {
		t.Fatalf("Resume of a running partition: %v, want ErrNotPaused", err)
	}
	if pausedHere(e.Engine, "order:{a}") {
		t.Fatal("Status still shows a paused after it ran again")
	}
}

// A halted head is not retried while its partition is paused; another
// halted partition's retries go on meanwhile, which shows the retry
// interval passing.
func TestPauseStopsAHaltedHeadsRetries(t *testing.T) {
	s := newPauseScene(t)
	var mu sync.Mutex
	tries := map[string]int{}
	h := keyedHandler("ph", func(_ context.Context, e *testEvent) error {
		mu.Lock()
		defer mu.Unlock()
		tries[e.Client]++
		if e.Poison {
			return errPoison
		}
		return nil
	})
	attempts := func(k string) int { mu.Lock(); defer mu.Unlock(); return tries[k] }
	opts := fastOptions("o1")
	opts.Retry.MaxRetries = -1
	opts.Retry.HaltedRetryInterval = 20 * time.Millisecond
	e := startEngine(t, s.c, opts, h)
	p := NewPublisher(s.c)
	for _, m := range []*testEvent{{Client: "a", Seq: 1, Poison: true}, {Client: "c", Seq: 1, Poison: true}} {
		if err := p.Publish(s.ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 20*time.Second, "both heads retried", func() bool { return attempts("a") >= 2 && attempts("c") >= 2 })
	if _, err := inspect.New(s.c).Pause(s.ctx, "ph", "order:{a}", "alice"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "the owner to find a paused", func() bool { return pausedHere(e.Engine, "order:{a}") })
	n := attempts("a")
	from := attempts("c")
	eventually(t, 20*time.Second, "c's head retried 5 more times", func() bool { return attempts("c") >= from+5 })
	if got := attempts("a"); got != n {
		t.Fatalf("a's halted head ran %d more times while paused", got-n)
	}
	if _, err := inspect.New(s.c).Resume(s.ctx, "ph", "order:{a}"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "a's head retried after Resume", func() bool { return attempts("a") > n })
}

// A pause outlives its owner: a graceful handover (the owner stops) and
// the next owner's claim find it, and nothing runs until Resume.
func TestPauseSurvivesAHandover(t *testing.T) {
	s := newPauseScene(t)
	e1 := startEngine(t, s.c, fastOptions("o1"), s.handler("pv"))
	s.publish("a", 1, 2)
	eventually(t, 20*time.Second, "a/1..2 applied", func() bool { return s.j.count("a") == 2 })
	in := inspect.New(s.c)
	if _, err := in.Pause(s.ctx, "pv", "order:{a}", "alice"); err != nil {
		t.Fatal(err)
	}
	s.publish("a", 3, 4)
	eventually(t, 20*time.Second, "o1 to find a paused", func() bool { return pausedHere(e1.Engine, "order:{a}") })
	e1.stop()
	e2 := startEngine(t, s.c, fastOptions("o2"), s.handler("pv"))
	eventually(t, 20*time.Second, "o2 to claim a and find it paused", func() bool { return pausedHere(e2.Engine, "order:{a}") })
	if got := s.enteredOf("a"); !slices.Equal(got, []int{1, 2}) {
		t.Fatalf("a entered %v while paused, want [1 2]", got)
	}
	if _, err := in.Resume(s.ctx, "pv", "order:{a}"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "a to go on at o2", func() bool { return s.j.count("a") == 4 })
	if got := s.j.seqs("a"); !slices.Equal(got, []int{1, 2, 3, 4}) {
		t.Fatalf("a applied %v, want 1..4", got)
	}
}

// Pausing a whole handler stops every key from the next discovery cycle
// (idle ones too, once woken by a publish), shows in Health and
// Partitions, and ResumeHandler lets them go on.
func TestPauseHandler(t *testing.T) {
	s := newPauseScene(t)
	e := startEngine(t, s.c, fastOptions("o1"), s.handler("pw"))
	s.publish("a", 1, 1)
	s.publish("b", 1, 1)
	eventually(t, 20*time.Second, "a/1 and b/1 applied", func() bool { return s.j.count("a") == 1 && s.j.count("b") == 1 })
	in := inspect.New(s.c)
	if _, err := in.PauseHandler(s.ctx, "pw", "alice"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "the engine to find the handler paused", func() bool {
		h := e.Health(s.ctx)
		return h.Ready && slices.ContainsFunc(h.Reasons, func(r string) bool { return strings.HasPrefix(r, "paused: handler pw") })
	})
	s.publish("a", 2, 3)
	s.publish("b", 2, 3)
	eventually(t, 20*time.Second, "both partitions paused", func() bool {
		return pausedHere(e.Engine, "order:{a}") && pausedHere(e.Engine, "order:{b}")
	})
	if s.j.count("a") != 1 || s.j.count("b") != 1 {
		t.Fatalf("applied a %v, b %v while the handler was paused", s.j.seqs("a"), s.j.seqs("b"))
	}
	if ps, err := in.Paused(s.ctx, "pw"); err != nil || len(ps) != 1 || ps[0].Partition != "" {
		t.Fatalf("Paused: %+v, %v, want the handler's pause", ps, err)
	}
	if _, err := in.ResumeHandler(s.ctx, "pw"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "a and b to go on", func() bool { return s.j.count("a") == 3 && s.j.count("b") == 3 })
}

// Pause and Resume refuse what they cannot act on, and change nothing.
func TestPauseRefusals(t *testing.T) {
	s := newPauseScene(t)
	startEngine(t, s.c, fastOptions("o1"), s.handler("px"))
	s.publish("a", 1, 1)
	eventually(t, 20*time.Second, "a/1 applied", func() bool { return s.j.count("a") == 1 })
	in := inspect.New(s.c)
	for _, tc := range []struct {
		name string
		call func() error
		want error
	}{
		{"unknown handler", func() error { _, err := in.Pause(s.ctx, "nope", "order:{a}", "x"); return err }, inspect.ErrUnknownHandler},
		{"unknown partition", func() error { _, err := in.Pause(s.ctx, "px", "order:{zz}", "x"); return err }, inspect.ErrNoPartition},
		{"resume of a running key", func() error { _, err := in.Resume(s.ctx, "px", "order:{a}"); return err }, inspect.ErrNotPaused},
		{"resume of a running handler", func() error { _, err := in.ResumeHandler(s.ctx, "px"); return err }, inspect.ErrNotPaused},
	} {
		if err := tc.call(); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	if p, err := in.CheckPause(s.ctx, "px", "order:{a}"); err != nil || p.Already {
		t.Fatalf("CheckPause: %+v, %v", p, err)
	}
	if s.c.HExists(s.ctx, "order:{a}:__lease__:px:__meta__", rdb.MetaPaused).Val() {
		t.Fatal("CheckPause stored a pause")
	}
}

// A sequential pm's correlation value pauses as a whole: its pause mark
// is the pm lease's, which every read of the value's streams checks; the
// other values go on, and Resume lets the value go on in order.
func TestPausePM(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	var mu sync.Mutex
	ran := map[string][]string{}
	pm := flowPM("pz-flow", func(_ context.Context, corr, event string, _ *pmPayment) error {
		mu.Lock()
		ran[corr] = append(ran[corr], event)
		mu.Unlock()
		return nil
	})
	events := func(corr string) []string { mu.Lock(); defer mu.Unlock(); return slices.Clone(ran[corr]) }
	e := startEngine(t, c, fastOptions("o1"), pm)
	p := NewPublisher(c)
	publish := func(ms ...Partitioned) {
		t.Helper()
		for _, m := range ms {
			if err := p.Publish(ctx, m); err != nil {
				t.Fatal(err)
			}
		}
	}
	publish(&pmOrder{OrderID: "o1", Seq: 1})
	eventually(t, 20*time.Second, "o1's first order", func() bool { return len(events("o1")) == 1 })
	in := inspect.New(c)
	pz, err := in.Pause(ctx, "pz-flow", "pmorder:{o1}", "alice")
	if err != nil || pz.Mark != "{o1}:__pmstate__:pz-flow" {
		t.Fatalf("Pause of a pm's value: %+v, %v", pz, err)
	}
	publish(&pmOrder{OrderID: "o1", Seq: 2}, &pmPayment{OrderID: "o1", Seq: 1}, &pmOrder{OrderID: "o2", Seq: 1})
	eventually(t, 20*time.Second, "o2 runs past o1's pause", func() bool { return len(events("o2")) == 1 })
	eventually(t, 20*time.Second, "the owner to find o1 paused", func() bool {
		for _, ps := range e.Status().Paused() {
			if ps.Key == "o1" {
				return true
			}
		}
		return false
	})
	if got := events("o1"); len(got) != 1 {
		t.Fatalf("o1 ran %v while paused", got)
	}
	if _, err := in.Resume(ctx, "pz-flow", "pmorder:{o1}"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "o1 goes on after Resume", func() bool { return len(events("o1")) == 3 })
	f, _ := loadFlow(t, e.o.StateStore, "pz-flow", "o1")
	if !slices.Equal(f.Orders, []int{1, 2}) || !slices.Equal(f.Payments, []int{1}) {
		t.Fatalf("o1's state %+v, want orders 1,2 and payment 1", f)
	}
}

// signalledSince waits until e has read a wake-up signal of category's
// key counted after mark (a mark taken before the call that sent it).
func signalledSince(t *testing.T, e *Engine, category, key string, mark uint64) {
	t.Helper()
	eventually(t, 20*time.Second, "the engine to read the wake-up of "+key, func() bool {
		return e.wake.Stats(category, key).Last > mark
	})
}

// asleep reports whether a partition of category's key sleeps at e (its
// wake-up callback armed).
func asleep(e *Engine, category, key string) bool {
	return e.wake.Stats(category, key).Sleeping > 0
}

// An idle partition shows its pause at once: Pause wakes its owner,
// whose read finds the mark (before, it showed only at the safety-net
// re-read, 24-36 s later); Resume's wake-up clears it again.
func TestPauseShowsOnAnIdlePartition(t *testing.T) {
	s := newPauseScene(t)
	e := startEngine(t, s.c, fastOptions("o1"), s.handler("pi"))
	s.publish("a", 1, 1)
	s.publish("b", 1, 1)
	eventually(t, 20*time.Second, "a/1 and b/1 applied, both asleep", func() bool {
		return s.j.count("a") == 1 && s.j.count("b") == 1 && asleep(e.Engine, "order", "a") && asleep(e.Engine, "order", "b")
	})
	in := inspect.New(s.c)
	if _, err := in.Pause(s.ctx, "pi", "order:{a}", "alice"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "the idle owner to show a paused", func() bool {
		h := e.Health(s.ctx)
		return pausedHere(e.Engine, "order:{a}") && slices.ContainsFunc(h.Reasons, func(r string) bool { return strings.Contains(r, "paused: partition a of handler pi") })
	})
	if pausedHere(e.Engine, "order:{b}") {
		t.Fatal("b shows paused")
	}
	if _, err := in.Resume(s.ctx, "pi", "order:{a}"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "a to show running again", func() bool { return !pausedHere(e.Engine, "order:{a}") })
}

// A handler's pause found while an attempt waits for its concurrency
// slot refuses that attempt when it gets the slot: the in-memory pause
// is the handler pause's only check, so it is made last.
func TestHandlerPauseStopsAnAttemptWaitingForASlot(t *testing.T) {
	s := newPauseScene(t)
	opts := fastOptions("o1")
	opts.Concurrency = 1
	e := startEngine(t, s.c, opts, s.handler("pc"))
	release := s.holdAt("a", 1)
	s.publish("a", 1, 1)
	eventually(t, 20*time.Second, "a/1 in the handler", func() bool { return len(s.enteredOf("a")) == 1 })
	s.publish("b", 1, 1)
	// Delivered to the owner: its worker now waits for the one slot.
	eventually(t, 20*time.Second, "b/1 read", func() bool {
		p, err := s.c.XPending(s.ctx, "order:{b}", laneGroup(t, s.c, "order:{b}", "pc")).Result()
		return err == nil && p.Count == 1
	})
	if _, err := inspect.New(s.c).PauseHandler(s.ctx, "pc", "alice"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "the engine to find the handler paused", func() bool {
		return slices.Contains(e.Status().PausedHandlers, "pc")
	})
	release()
	eventually(t, 20*time.Second, "b asleep", func() bool { return asleep(e.Engine, "order", "b") })
	if got := s.enteredOf("b"); len(got) != 0 {
		t.Fatalf("b entered %v after its handler's pause was found", got)
	}
	if _, err := inspect.New(s.c).ResumeHandler(s.ctx, "pc"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "b/1 applied after the resume", func() bool { return s.j.count("b") == 1 })
}

// prefetchGate is a go-redis hook that holds the first round call
// carrying a prefetch (RoundReadNew) of stream until opened, and reports
// when it caught it and when its reply came.
type prefetchGate struct {
	stream       string
	once         sync.Once
	caught, open chan struct{}
	replied      chan struct{}
}

func newPrefetchGate(stream string) *prefetchGate {
	return &prefetchGate{stream: stream, caught: make(chan struct{}), open: make(chan struct{}), replied: make(chan struct{})}
}

func (g *prefetchGate) DialHook(next redis.DialHook) redis.DialHook { return next }

func (g *prefetchGate) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if !g.catch([]redis.Cmder{cmd}) {
			return next(ctx, cmd)
		}
		defer close(g.replied)
		return next(ctx, cmd)
	}
}

func (g *prefetchGate) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if !g.catch(cmds) {
			return next(ctx, cmds)
		}
		defer close(g.replied)
		return next(ctx, cmds)
	}
}

// catch holds the first prefetch of g.stream until g.open is closed.
func (g *prefetchGate) catch(cmds []redis.Cmder) bool {
	hit := false
	for _, cmd := range cmds {
		if args := cmd.Args(); strings.EqualFold(cmd.Name(), "xpending") && len(args) > 3 && args[1] == g.stream {
			// A plain prefetch (rdb/plain.go): what is pending after
			// the entries the owner holds.
			after, _ := args[3].(string)
			hit = hit || strings.HasPrefix(after, "(")
			continue
		}
		if !strings.HasPrefix(strings.ToLower(cmd.Name()), "eval") {
			continue
		}
		stream, prefetch := false, false
		for _, a := range cmd.Args() {
			stream = stream || a == g.stream
			prefetch = prefetch || a == string(rdb.RoundReadNew)
		}
		hit = hit || stream && prefetch
	}
	if !hit {
		return false
	}
	first := false
	g.once.Do(func() { first = true })
	if !first {
		return false
	}
	close(g.caught)
	<-g.open
	return true
}

// A batched partition whose prefetch finds it paused sleeps on the
// wake-up mark the prefetch was sent under: a Resume whose wake-up is
// read before the worker next takes a mark (here, while an entry is in
// the handler) still wakes it, rather than leaving it to the safety-net
// re-read (24-36 s).
func TestResumeWakesABatchedPartitionPausedByItsPrefetch(t *testing.T) {
	s := newPauseScene(t)
	s.publish("a", 1, 12)
	gate := newPrefetchGate("order:{a}")
	c := redis.NewClient(&redis.Options{Addr: s.c.Options().Addr, ContextTimeoutEnabled: true})
	t.Cleanup(func() { c.Close() })
	c.AddHook(gate)
	opts := fastOptions("o1")
	opts.ReadAhead = 4
	h := s.handler("pb")
	h.AckBatch = 4
	release := s.holdAt("a", 3)
	e := startEngine(t, c, opts, h)
	// a/3 starts once the prefetch (sent as a/3 was taken) is in flight.
	select {
	case <-gate.caught:
	case <-s.ctx.Done():
		t.Fatal("no prefetch of order:{a} was sent")
	}
	eventually(t, 20*time.Second, "a/3 in the handler", func() bool { return len(s.enteredOf("a")) == 3 })
	in := inspect.New(s.c)
	before := e.wake.Mark("order", "a")
	if _, err := in.Pause(s.ctx, "pb", "order:{a}", "alice"); err != nil {
		t.Fatal(err)
	}
	signalledSince(t, e.Engine, "order", "a", before) // Pause's, read while a/3 runs
	close(gate.open)                                  // the prefetch runs now, and finds the pause
	<-gate.replied
	before = e.wake.Mark("order", "a")
	if _, err := in.Resume(s.ctx, "pb", "order:{a}"); err != nil {
		t.Fatal(err)
	}
	signalledSince(t, e.Engine, "order", "a", before)
	release()
	eventually(t, 20*time.Second, "a/4..a/12 applied after the resume", func() bool { return s.j.count("a") == 12 })
	if got := s.j.seqs("a"); !slices.Equal(got, []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}) {
		t.Fatalf("a applied %v, want 1..12 in order", got)
	}
}

// A paused partition costs nothing: once asleep it is not read again
// while other keys run (before, acked entries it had not trimmed yet
// made its idle wait a millisecond, and it re-read its partition, found
// the pause and slept again, over and over).
func TestPausedPartitionIsNotPolled(t *testing.T) {
	s := newPauseScene(t)
	calls := &scriptArgs{}
	const mark = "order:{a}:__lease__:pp:__meta__" // every read, ack and verification of a names it
	c := redis.NewClient(&redis.Options{Addr: s.c.Options().Addr, ContextTimeoutEnabled: true})
	t.Cleanup(func() { c.Close() })
	c.AddHook(calls)
	e := startEngine(t, c, fastOptions("o1"), s.handler("pp"))
	release := s.holdAt("a", 2)
	s.publish("a", 1, 3)
	eventually(t, 20*time.Second, "a/2 in the handler", func() bool { return len(s.enteredOf("a")) == 2 })
	seq := e.wake.Mark("order", "a")
	if _, err := inspect.New(s.c).Pause(s.ctx, "pp", "order:{a}", "alice"); err != nil {
		t.Fatal(err)
	}
	// Pause's wake-up read while a/2 runs: it wakes nothing later.
	signalledSince(t, e.Engine, "order", "a", seq)
	release()
	eventually(t, 20*time.Second, "a paused and asleep", func() bool {
		return pausedHere(e.Engine, "order:{a}") && asleep(e.Engine, "order", "a")
	})
	before := calls.naming(mark)
	for i := 1; i <= 20; i++ {
		s.publish("b", i, i)
		eventually(t, 20*time.Second, "b applied", func() bool { return s.j.count("b") == i })
	}
	if n := calls.naming(mark) - before; n != 0 {
		t.Fatalf("the paused partition was read %d times while b ran 20 events", n)
	}
}

// A confirmation sent holding the only concurrency slot, which Redis ran
// just before a pause's mark was stored and whose reply came late (80ms
// over a 25ms VerifyBound), starts no attempt after Pause returned: the
// engine raises its admitted confirmation age, stores it and confirms
// again, which finds the pause. Once raised, the next Pause waits that
// age out, while the late confirmation within it is used (before Pause
// returns). Handler starts and Pause's return are on this process's
// monotonic clock.
func TestPauseHoldsAgainstAConfirmationAnsweredLate(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	const late, work = 80 * time.Millisecond, 40 * time.Millisecond
	var starts attemptStarts
	started := starts.of
	h := starts.handler("pl", work)
	opts := fastOptions("o1")
	opts.Concurrency = 1 // a and b take turns: a's slot waits outlast the bound
	opts.LeaseTTL, opts.HeartbeatInterval = 5*time.Second, time.Second
	var armed atomic.Bool
	caught := make(chan struct{}, 1)
	startEngineWith(t, c, opts, func(e *Engine) {
		e.leases.SetHeldConfirmHook(func(h *lease.Held) {
			if h.Key() == "a" && armed.CompareAndSwap(true, false) {
				caught <- struct{}{}
				time.Sleep(late) // Redis ran it; its reply comes late
			}
		})
	}, h)
	p := NewPublisher(c)
	for i := 1; i <= 60; i++ {
		for _, k := range []string{"a", "b"} {
			if err := p.Publish(ctx, ev(k, i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	in := inspect.New(c)
	for round := 1; round <= 2; round++ {
		armed.Store(true)
		select {
		case <-caught:
		case <-ctx.Done():
			t.Fatalf("round %d: no confirmation of a was sent holding the slot", round)
		}
		called := time.Now()
		if _, err := in.Pause(ctx, "pl", "order:{a}", "alice"); err != nil {
			t.Fatal(err)
		}
		returned := time.Now()
		time.Sleep(4 * late) // the late reply has come and been judged
		for _, at := range started("a") {
			if at.After(returned) {
				t.Errorf("round %d: an attempt of a started %v after Pause returned (it took %v; a confirmation answered %v late, VerifyBound %v)",
					round, at.Sub(returned).Round(time.Millisecond), returned.Sub(called).Round(time.Millisecond), late, lease.DefaultVerifyBound)
			}
		}
		if round == 2 && returned.Sub(called) < late {
			t.Errorf("round 2: Pause took %v, want at least the admitted age the engine raised above %v in round 1", returned.Sub(called), late)
		}
		n := len(started("a"))
		if _, err := in.Resume(ctx, "pl", "order:{a}"); err != nil {
			t.Fatal(err)
		}
		eventually(t, 20*time.Second, "a to go on after Resume", func() bool { return len(started("a")) > n })
	}
}

// Over a link slower than VerifyBound, the engine stores an admitted
// confirmation age above the link's round trip before it starts an
// attempt on a confirmation that old; a store whose reply is lost (Redis
// ran it, go-redis sends it again) stores that age once, and the attempt
// starts.
func TestAdmitAgeStoredOverASlowLinkOnce(t *testing.T) {
	base, ctx := newRedis(t), ctxT(t)
	const link = 30 * time.Millisecond
	var l redistest.LostReply
	l.Arm(runsScript("admit_age"), redistest.EOF, 1)
	c := redis.NewClient(&redis.Options{Addr: base.Options().Addr, ContextTimeoutEnabled: true, Dialer: l.Dialer(nil)})
	t.Cleanup(func() { c.Close() })
	c.AddHook(&replyHook{every: link})
	var ran atomic.Int64
	opts := fastOptions("s")
	opts.LeaseTTL, opts.HeartbeatInterval = 5*time.Second, time.Second
	r := startEngine(t, c, opts, keyedHandler("slow", func(context.Context, *testEvent) error { ran.Add(1); return nil }))
	if err := NewPublisher(base).Publish(ctx, ev("a", 1)); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "the handler runs over a 30ms link", func() bool { return ran.Load() == 1 })
	if l.Lost() != 1 {
		t.Fatalf("lost %d replies of admit_age, want 1: the attempt started without storing an admitted age", l.Lost())
	}
	members, _, err := rdb.AdmitAgeRecords(ctx, base, "slow")
	if err != nil || len(members) != 1 || !strings.HasSuffix(members[0], "|"+r.incarnation) {
		t.Fatalf("admitted ages %v (%v), want one of incarnation %s", members, err, r.incarnation)
	}
	if a, err := rdb.AdmitAge(ctx, base, "slow"); err != nil || a < link {
		t.Fatalf("admitted age %v (%v), want above the link's %v", a, err, link)
	}
}

// An engine whose reads of the handler's pause fail treats the handler as
// paused once its last successful read is two discovery intervals old,
// until a read succeeds: a PauseHandler made meanwhile holds from then on
// (seen before: every event published after PauseHandler ran, the engine
// keeping the last state it read). It says so once (a warning) and once
// more when it reads the pause again (info); the operator's pause it then
// finds holds until ResumeHandler.
func TestHandlerPauseHoldsWhileItCannotBeRead(t *testing.T) {
	base, ctx := newRedis(t), ctxT(t)
	var fault redistest.Refusal
	c := redis.NewClient(&redis.Options{Addr: base.Options().Addr, ContextTimeoutEnabled: true})
	t.Cleanup(func() { c.Close() })
	c.AddHook(&fault)
	pauseRead := func(args []string) bool {
		return strings.EqualFold(args[0], "hmget") && len(args) == 3 && args[1] == rdb.ControlKey("pu")
	}
	var starts attemptStarts
	started := func() []time.Time { return starts.of("a") }
	var logs syncBuffer
	opts := fastOptions("o1")
	opts.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	startEngine(t, c, opts, starts.handler("pu", 0))
	p := NewPublisher(base)
	if err := p.Publish(ctx, ev("a", 1)); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "a/1 applied", func() bool { return len(started()) == 1 })
	fault.Arm(pauseRead, errors.New("LOADING Redis is loading the dataset in memory"), -1)
	in := inspect.New(base)
	if _, err := in.PauseHandler(ctx, "pu", "alice"); err != nil {
		t.Fatal(err)
	}
	returned := time.Now()
	// Published over the next second, one at a time: any that started
	// later than two discovery intervals (and a little scheduling) after
	// PauseHandler returned breaks the promise.
	for seq := 2; seq <= 11; seq++ {
		if err := p.Publish(ctx, ev("a", seq)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	limit := returned.Add(2*opts.DiscoveryInterval + 100*time.Millisecond)
	late := func() {
		t.Helper()
		for _, at := range started() {
			if at.After(limit) {
				t.Errorf("an attempt of a started %v after PauseHandler returned (DiscoveryInterval %v)",
					at.Sub(returned).Round(time.Millisecond), opts.DiscoveryInterval)
			}
		}
	}
	late()
	if fault.Refused() == 0 {
		t.Fatal("no read of the handler's pause failed")
	}
	if n := strings.Count(logs.String(), "cannot read the handler's pause"); n != 1 {
		t.Errorf("warned %d times that the pause cannot be read; want once", n)
	}
	fault.Disarm()
	eventually(t, 20*time.Second, "the engine to read the pause again", func() bool {
		return strings.Count(logs.String(), "read the handler's pause again") == 1
	})
	time.Sleep(300 * time.Millisecond) // alice's pause, read now, still holds
	late()
	if _, err := in.ResumeHandler(ctx, "pu"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "a to go on after ResumeHandler", func() bool { return len(started()) == 11 })
}
