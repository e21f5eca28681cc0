package inspect

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seqby/seqby/internal/redistest"
	"github.com/seqby/seqby/runtime/internal/rdb"
)

// storeClock is a go-redis hook that delays the SADDs listing a pause
// before its store (a slow Redis) and notes when the SET NX storing a
// mark was answered.
type storeClock struct {
	delay  time.Duration
	mu     sync.Mutex
	stored time.Time
}

func (h *storeClock) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *storeClock) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		name := strings.ToLower(cmd.Name())
		if name == "sadd" && h.storedAt().IsZero() {
			time.Sleep(h.delay)
		}
		err := next(ctx, cmd)
		if name == "hsetnx" && strings.HasSuffix(cmd.Args()[1].(string), ":__meta__") {
			h.mu.Lock()
			h.stored = time.Now()
			h.mu.Unlock()
		}
		return err
	}
}

func (h *storeClock) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (h *storeClock) storedAt() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.stored
}

// pausable is a Redis where handler orders reads category shop, with a
// partition for each of keys, and whose client notes when the store of a
// pause's mark was answered.
func pausable(t *testing.T, keys ...string) (*redis.Client, context.Context, *storeClock) {
	t.Helper()
	c := newRedis(t)
	ctx := ctxT(t)
	clock := &storeClock{}
	c.AddHook(clock)
	if _, err := rdb.RegisterGroup(ctx, c, "shop", "orders", false); err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		publish(t, c, "shop", k, 1)
	}
	return c, ctx, clock
}

// Pause returns no sooner than the engines' VerifyBound after the mark
// was stored, however long the calls before the store took (the wait
// counts from the store's reply, not from the note's time, taken before
// them on the operator's wall clock), and a Pause that finds the mark in
// force (stored a moment ago by another operator) waits the bound too.
func TestPauseWaitsTheBoundAfterTheStore(t *testing.T) {
	c := newRedis(t)
	ctx := ctxT(t)
	clock := &storeClock{delay: 200 * time.Millisecond}
	c.AddHook(clock)
	if _, err := rdb.RegisterGroup(ctx, c, "shop", "orders", false); err != nil {
		t.Fatal(err)
	}
	publish(t, c, "shop", "a", 1)
	const bound = 50 * time.Millisecond
	in := New(c).WithVerifyBound(bound)
	p, err := in.Pause(ctx, "orders", "shop:{a}", "alice")
	returned := time.Now()
	if err != nil || p.Already {
		t.Fatalf("Pause: %+v, %v", p, err)
	}
	if stored := clock.storedAt(); stored.IsZero() || returned.Sub(stored) < bound {
		t.Fatalf("Pause returned %v after the mark was stored, want at least the bound %v", returned.Sub(stored), bound)
	}
	start := time.Now()
	again, err := in.Pause(ctx, "orders", "shop:{a}", "bob")
	if err != nil || !again.Already || again.By != "alice" {
		t.Fatalf("a second Pause: %+v, %v, want alice's pause in force", again, err)
	}
	if waited := time.Since(start); waited < bound {
		t.Fatalf("a Pause finding the mark in force returned after %v, want at least the bound %v", waited, bound)
	}
}

// Pause waits the largest admitted confirmation age the handler's
// engines recorded (runtime/admitage.go), when it exceeds the bound, from
// the store's answer; another handler's does not count.
func TestPauseWaitsTheEnginesAdmittedAge(t *testing.T) {
	c, ctx, clock := pausable(t, "a")
	const admitted = 150 * time.Millisecond
	for _, s := range []struct {
		handler string
		age     time.Duration
	}{{"orders", admitted}, {"orders", 60 * time.Millisecond}, {"billing", 2 * admitted}} {
		if err := rdb.StoreAdmitAge(ctx, c, s.handler, "o~1", s.age, time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	if _, err := New(c).Pause(ctx, "orders", "shop:{a}", "alice"); err != nil {
		t.Fatal(err)
	}
	returned := time.Now()
	if waited := returned.Sub(clock.storedAt()); waited < admitted {
		t.Fatalf("Pause returned %v after the mark was stored, want at least the admitted age %v", waited, admitted)
	}
	if took := returned.Sub(start); took >= 2*admitted {
		t.Fatalf("Pause took %v: it waited another handler's admitted age %v", took, 2*admitted)
	}
}

// A handler removed for good while paused (its registration deleted, as
// docs/operating.md's recipe does) leaves its pauses listed: Resume and
// ResumeHandler still end them, so seqbyctl paused empties and a handler
// added again under that name does not start paused.
func TestResumeAfterTheHandlerWasRemoved(t *testing.T) {
	c := newRedis(t)
	ctx := ctxT(t)
	if _, err := rdb.RegisterGroup(ctx, c, "shop", "orders", false); err != nil {
		t.Fatal(err)
	}
	publish(t, c, "shop", "a", 1)
	in := New(c)
	if _, err := in.Pause(ctx, "orders", "shop:{a}", "alice"); err != nil {
		t.Fatal(err)
	}
	if _, err := in.PauseHandler(ctx, "orders", "alice"); err != nil {
		t.Fatal(err)
	}
	if err := c.HDel(ctx, rdb.GroupsKey("shop"), "orders").Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := in.Handler(ctx, "orders"); !errors.Is(err, ErrUnknownHandler) {
		t.Fatalf("the removed handler: %v, want ErrUnknownHandler", err)
	}
	if p, err := in.CheckResume(ctx, "orders", "shop:{a}"); err != nil || p.By != "alice" {
		t.Fatalf("CheckResume of a removed handler's pause: %+v, %v", p, err)
	}
	if _, err := in.Resume(ctx, "orders", "shop:{a}"); err != nil {
		t.Fatalf("Resume of a removed handler's pause: %v", err)
	}
	if _, err := in.ResumeHandler(ctx, "orders"); err != nil {
		t.Fatalf("ResumeHandler of a removed handler: %v", err)
	}
	if ps, err := in.Paused(ctx, ""); err != nil || len(ps) != 0 {
		t.Fatalf("Paused after both resumes: %+v, %v, want none", ps, err)
	}
	if _, err := in.Resume(ctx, "orders", "shop:{a}"); !errors.Is(err, ErrUnknownHandler) {
		t.Fatalf("a second Resume: %v, want ErrUnknownHandler (nothing listed)", err)
	}
}

// Pause and Resume take a bare key when it names one partition: the
// handler reads one category. With several, the key is refused with the
// categories to choose from.
func TestPauseByKey(t *testing.T) {
	c := newRedis(t)
	ctx := ctxT(t)
	for _, r := range []struct{ cat, group string }{{"shop", "orders"}, {"shop", "multi"}, {"pay", "multi"}} {
		if _, err := rdb.RegisterGroup(ctx, c, r.cat, r.group, false); err != nil {
			t.Fatal(err)
		}
	}
	publish(t, c, "shop", "a", 1)
	publish(t, c, "pay", "a", 1)
	in := New(c).WithVerifyBound(time.Millisecond)
	p, err := in.Pause(ctx, "orders", "a", "alice")
	if err != nil || p.Partition != "shop:{a}" || p.Mark != rdb.MetaKey(rdb.LeaseKey("shop:{a}", "orders")) {
		t.Fatalf("Pause by key: %+v, %v", p, err)
	}
	if ps, err := in.Paused(ctx, "orders"); err != nil || len(ps) != 1 || ps[0].Partition != "shop:{a}" {
		t.Fatalf("Paused: %+v, %v, want shop:{a}", ps, err)
	}
	if r, err := in.Resume(ctx, "orders", "a"); err != nil || r.Partition != "shop:{a}" {
		t.Fatalf("Resume by key: %+v, %v", r, err)
	}
	if _, err := in.Pause(ctx, "orders", "zz", "alice"); !errors.Is(err, ErrNoPartition) {
		t.Fatalf("Pause of an unknown key: %v, want ErrNoPartition", err)
	}
	_, err = in.Pause(ctx, "multi", "a", "alice")
	if !errors.Is(err, ErrNoPartition) || !strings.Contains(err.Error(), "pay, shop") {
		t.Fatalf("Pause by key of a handler reading two categories: %v, want ErrNoPartition naming them", err)
	}
	if c.HExists(ctx, rdb.MetaKey(rdb.LeaseKey("shop:{a}", "multi")), rdb.MetaPaused).Val() ||
		c.HExists(ctx, rdb.MetaKey(rdb.LeaseKey("pay:{a}", "multi")), rdb.MetaPaused).Val() {
		t.Fatal("a refused Pause stored a mark")
	}
}

// A bare key names a sequential pm's value by the first of its
// categories that holds a stream of it; and Resume by a bare key finds
// the listed mark of a removed handler.
func TestPauseByKeyPMAndRemoved(t *testing.T) {
	c := newRedis(t)
	ctx := ctxT(t)
	for _, cat := range []string{"ord", "pay"} {
		if _, err := rdb.RegisterGroup(ctx, c, cat, "flow", false); err != nil {
			t.Fatal(err)
		}
	}
	publish(t, c, "pay", "v", 1) // the value has a stream in pay only
	if _, _, err := rdb.RecordDeploy(ctx, c, "flow", "o1", "sequential", rdb.Layout, "b1", "", nil, nil); err != nil {
		t.Fatal(err)
	}
	in := New(c).WithVerifyBound(time.Millisecond)
	p, err := in.Pause(ctx, "flow", "v", "alice")
	if err != nil || p.Partition != "pay:{v}" || p.Mark != rdb.MetaKey(rdb.PMLeaseKey("flow", "v")) {
		t.Fatalf("Pause of a pm's value by key: %+v, %v", p, err)
	}
	c.HDel(ctx, rdb.GroupsKey("ord"), "flow")
	c.HDel(ctx, rdb.GroupsKey("pay"), "flow")
	if r, err := in.Resume(ctx, "flow", "v"); err != nil || r.Partition != "pay:{v}" {
		t.Fatalf("Resume by key of a removed handler's pause: %+v, %v", r, err)
	}
	if ps, err := in.Paused(ctx, ""); err != nil || len(ps) != 0 {
		t.Fatalf("Paused after the resume: %+v, %v", ps, err)
	}
}

// Pause waits max(bound, A) plus a margin (A/512 + 1ms) from the store's
// answer: the engine admits within A on its own clock, and the clocks'
// rates and the scheduling between an engine's admit and the handler's
// call would otherwise make the wait a few ms short at an A of seconds
// (seen before the margin: it returned 3002ms after the store, under
// the 3006.9ms this test wants).
func TestPauseWaitsAMarginPastTheAdmittedAge(t *testing.T) {
	c, ctx, clock := pausable(t, "a")
	const admitted = 3 * time.Second
	if err := rdb.StoreAdmitAge(ctx, c, "orders", "o~1", admitted, time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := New(c).Pause(ctx, "orders", "shop:{a}", "alice"); err != nil {
		t.Fatal(err)
	}
	want := admitted + admitted/512 + time.Millisecond
	if waited := time.Since(clock.storedAt()); waited < want {
		t.Fatalf("Pause returned %v after the mark was stored; want at least %v (the admitted age and its margin)", waited, want)
	}
}

// admitRead matches the reads of the admitted confirmation age
// (admit_age_read.lua).
func admitRead(args []string) bool {
	n := strings.ToLower(args[0])
	return (n == "evalsha" || n == "eval") && len(args) > 1 && rdb.ScriptName(args[1]) == "admit_age_read"
}

// A read of the admitted age that fails is tried again, with a backoff,
// while ctx lasts: Pause then waits the age it read and succeeds (seen
// before: it returned the first failure as an error, and a caller that
// took it for a failed pause recorded nothing though the mark was
// stored). Failing until ctx ends, it returns ErrUnsettled with the mark
// stored.
func TestPauseReadsTheAdmittedAgeAgain(t *testing.T) {
	c, ctx, clock := pausable(t, "a", "b")
	var fault redistest.Refusal
	c.AddHook(&fault)
	loading := errors.New("LOADING Redis is loading the dataset in memory")
	fault.Arm(admitRead, loading, 3)
	const admitted = 100 * time.Millisecond
	if err := rdb.StoreAdmitAge(ctx, c, "orders", "o~1", admitted, time.Minute); err != nil {
		t.Fatal(err)
	}
	in := New(c)
	if _, err := in.Pause(ctx, "orders", "shop:{a}", "alice"); err != nil {
		t.Fatalf("Pause with the first 3 reads of the admitted age failing: %v", err)
	}
	if waited := time.Since(clock.storedAt()); waited < admitted {
		t.Fatalf("Pause returned %v after the store; want at least the admitted age %v, read at the 4th try", waited, admitted)
	}
	if fault.Refused() != 3 {
		t.Fatalf("refused %d reads of the admitted age; want 3, then a read that succeeded", fault.Refused())
	}
	fault.Arm(admitRead, loading, -1)
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	p, err := in.Pause(short, "orders", "shop:{b}", "alice")
	if !errors.Is(err, ErrUnsettled) || p.Mark == "" || p.Already {
		t.Fatalf("Pause with every read failing: %+v, %v; want ErrUnsettled and the Pause it stored", p, err)
	}
	if n, ok, gerr := rdb.GetPause(ctx, c, p.Mark); gerr != nil || !ok || n.By != "alice" {
		t.Fatalf("the mark after ErrUnsettled: %+v, %v, %v; want alice's, stored", n, ok, gerr)
	}
}
