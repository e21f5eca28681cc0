package runtime

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seqby/seqby/internal/redistest"
	"github.com/seqby/seqby/runtime/internal/executor"
	"github.com/seqby/seqby/runtime/internal/rdb"
)

// Rolling deploys (package membership): a build's routes decide what it acks
// unrun, but never a type another live build of the same handler routes;
// a handler whose kind changed under its name is refused while the other
// kind's instances are live.

func nop(context.Context, *testEvent) error { return nil }

// ownedKey publishes one event to each of eight keys and returns a key
// whose deploy.h partition r owns.
func ownedKey(t *testing.T, ctx context.Context, pub *Publisher, r *running, who string) string {
	t.Helper()
	for _, k := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
		if err := pub.Publish(ctx, ev(k, 1)); err != nil {
			t.Fatal(err)
		}
	}
	var key string
	eventually(t, 20*time.Second, who+" to own a partition", func() bool {
		for _, p := range r.Status().Partitions {
			if p.Handler == "deploy.h" {
				key = p.Key
				return true
			}
		}
		return false
	})
	return key
}

// unkeyedOrders is an unkeyed handler on the partitioned category "order":
// its instances share a consumer group on each partition stream.
func unkeyedOrders(name string, fn func(ctx context.Context, e *testEvent) error) Registration {
	return Registration{Name: name, Kind: EventHandler, Routes: []Route{orderRoute("Client", fn)}}
}

// withType is rt for another wire type of the same payload.
func withType(rt Route, typ string) Route { rt.Type = typ; return rt }

// addRaw appends an entry of type typ for client key to its partition
// stream, indexes the key, and returns the entry's id.
func addRaw(t *testing.T, c redis.UniversalClient, key, typ string) string {
	t.Helper()
	ctx := context.Background()
	id, err := c.XAdd(ctx, &redis.XAddArgs{Stream: rdb.PartitionStream("order", key),
		Values: []any{rdb.FieldType, typ, rdb.FieldPayload, `{"client":"` + key + `","seq":100}`}}).Result()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.SAdd(ctx, rdb.IndexKey("order"), key).Err(); err != nil {
		t.Fatal(err)
	}
	return id
}

// ackedIn reports whether group acked entry id of stream: delivered to it
// and no longer pending.
func ackedIn(t *testing.T, c redis.UniversalClient, stream, group, id string) bool {
	t.Helper()
	ctx := context.Background()
	gs, err := c.XInfoGroups(ctx, stream).Result()
	if err != nil {
		t.Fatal(err)
	}
	g, ok := rdb.GroupOf(gs, group)
	if !ok || executor.EntryAfter(id, g.LastDeliveredID) {
		return false
	}
	ps, err := c.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: stream, Group: g.Name, Start: id, End: id, Count: 1}).Result()
	if err != nil {
		t.Fatal(err)
	}
	return len(ps) == 0
}

// ranSet records the keys whose "testCancelled" a build ran.
type ranSet struct {
	mu  sync.Mutex
	ran map[string]bool
}

func (r *ranSet) route() Route {
	return withType(orderRoute("Client", func(_ context.Context, e *testEvent) error {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.ran == nil {
			r.ran = map[string]bool{}
		}
		r.ran[e.Client] = true
		return nil
	}), "testCancelled")
}

func (r *ranSet) has(key string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ran[key]
}

// A keyed handler gains a route for "testCancelled", a type its old build
// knew from another handler's Catalog. The old build runs first; once the
// new build is live and the old instance has read its record again (a type
// it does not route prompts that, at most once per DiscoveryInterval), the
// old build's owner of a partition halts on such an entry (not
// permanently) instead of acking it unrun, and once the old build stops
// the new one takes the partition over and runs it. (On the old code the
// old build acked every one.)
//
// restarted: the old instance is restarted after the new build started (a
// crash or the last old pod of a rollout), which the first version took
// for a rollback, the newest build, and acked the new build's type again.
func TestDeployNewerBuildsTypeKeyed(t *testing.T) {
	for _, restart := range []bool{false, true} {
		t.Run(map[bool]string{false: "running", true: "restarted"}[restart], func(t *testing.T) {
			testDeployNewerBuildsTypeKeyed(t, restart)
		})
	}
}

func testDeployNewerBuildsTypeKeyed(t *testing.T, restart bool) {
	c, ctx := newRedis(t), ctxT(t)
	var newRan ranSet
	newH := keyedHandler("deploy.h", nop)
	newH.Routes = append(newH.Routes, newRan.route())
	oldH := keyedHandler("deploy.h", nop)
	oldH.Catalog = map[string][]string{"order": {"testCancelled"}}

	halts := make(chan Halt, 16)
	oldOpts := fastOptions("old")
	oldOpts.OnHalt = func(h Halt) { halts <- h }
	old, err := tryStart(t, c, oldOpts, oldH)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tryStart(t, c, fastOptions("new"), newH); err != nil {
		t.Fatal(err)
	}
	if restart {
		old.stop()
		if old, err = tryStart(t, c, oldOpts, oldH); err != nil {
			t.Fatal(err)
		}
	}
	pub := NewPublisher(c)
	key := ownedKey(t, ctx, pub, old, "the old build")
	stream := rdb.PartitionStream("order", key)
	// Entries the old instance decides on before it has read the new
	// build's record are acked (the documented window); later ones halt.
	var halt Halt
	deadline := time.Now().Add(20 * time.Second)
	for seq := 2; halt.EntryID == "" && !newRan.has(key); seq++ {
		if time.Now().After(deadline) {
			t.Fatalf("the old build kept acking testCancelled entries of %s unrun while the new build, which routes them, is live", key)
		}
		id := addRaw(t, c, key, "testCancelled")
		if err := pub.Publish(ctx, ev(key, seq)); err != nil { // wakes the partition
			t.Fatal(err)
		}
		eventually(t, 20*time.Second, "the entry to be run, halted on or acked", func() bool {
			select {
			case halt = <-halts:
				return true
			default:
			}
			return ackedIn(t, c, stream, "deploy.h", id) || newRan.has(key)
		})
	}
	if halt.EntryID != "" && (halt.Permanent || !errors.Is(halt.Err, ErrRoutedByAnotherBuild)) {
		t.Errorf("halt %+v: want a halt that is not permanent, with an error matching ErrRoutedByAnotherBuild", halt)
	}
	old.stop()
	eventually(t, 20*time.Second, "the new build to run the entry", func() bool { return newRan.has(key) })
}

// The same for an unkeyed handler, and an old instance started after the
// new build (a restart while the deploy rolls): it inherits its build's
// deploy time from the old instance still live, so it counts as old. It
// leaves such an entry pending (halted) instead of acking it, and the new
// build claims it once the old instance stops. (On the old code the old
// build acked it.)
func TestDeployNewerBuildsTypeUnkeyed(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	var newRan ranSet
	entered := make(chan struct{}, 1)
	release := make(chan struct{})
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()
	// The new build's worker of the partition blocks in its first
	// testEvent, so the entries after it go to the old build.
	newU := unkeyedOrders("deploy.u", func(ctx context.Context, e *testEvent) error {
		select {
		case entered <- struct{}{}:
		default:
		}
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil
	})
	newU.Routes = append(newU.Routes, newRan.route())
	var oldMu sync.Mutex
	oldSeen := map[int]bool{}
	oldU := unkeyedOrders("deploy.u", func(_ context.Context, e *testEvent) error {
		oldMu.Lock()
		oldSeen[e.Seq] = true
		oldMu.Unlock()
		return nil
	})
	oldU.Catalog = map[string][]string{"order": {"testCancelled"}}

	old1, err := tryStart(t, c, fastOptions("old1"), oldU)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tryStart(t, c, fastOptions("new"), newU); err != nil {
		t.Fatal(err)
	}
	old2, err := tryStart(t, c, fastOptions("old2"), oldU)
	if err != nil {
		t.Fatal(err)
	}
	old1.stop()
	pub := NewPublisher(c)
	seq := 0
	for blocked := false; !blocked; {
		seq++
		if err := pub.Publish(ctx, ev("k", seq)); err != nil {
			t.Fatal(err)
		}
		eventually(t, 20*time.Second, "a testEvent to be handled", func() bool {
			select {
			case <-entered:
				blocked = true
				return true
			default:
			}
			oldMu.Lock()
			defer oldMu.Unlock()
			return oldSeen[seq]
		})
	}
	stream := rdb.PartitionStream("order", "k")
	id := addRaw(t, c, "k", "testCancelled")
	if err := pub.Publish(ctx, ev("k", seq+1)); err != nil { // wakes the old build's worker
		t.Fatal(err)
	}
	var halt *Halt
	eventually(t, 20*time.Second, "the old build to halt on the entry or ack it", func() bool {
		for _, h := range old2.Status().Halts {
			if h.EntryID == id {
				halt = &h
				return true
			}
		}
		return ackedIn(t, c, stream, "deploy.u", id)
	})
	if halt == nil {
		t.Fatal("the old build acked a testCancelled entry unrun while the new build, which routes it, is live")
	}
	if halt.Permanent || !errors.Is(halt.Err, ErrRoutedByAnotherBuild) {
		t.Errorf("halt %+v: want one that is not permanent, with an error matching ErrRoutedByAnotherBuild", *halt)
	}
	old2.stop()
	close(release)
	eventually(t, 20*time.Second, "the new build to claim and run the entry", func() bool { return newRan.has("k") })
}

// A newer build that dropped a route halts on the dropped type while an
// older build that routes it is live (which build is newer cannot be told
// safely: a restarted old pod looks like a rollback), and acks it unrun by
// its own rule once no live build routes it.
func TestDeployDroppedTypeWaitsForTheOldBuild(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	var oldRan ranSet
	oldH := keyedHandler("deploy.h", nop)
	oldH.Routes = append(oldH.Routes, oldRan.route())
	newH := keyedHandler("deploy.h", nop)
	newH.Catalog = map[string][]string{"order": {"testCancelled"}}
	old, err := tryStart(t, c, fastOptions("old"), oldH)
	if err != nil {
		t.Fatal(err)
	}
	halts := make(chan Halt, 16)
	newOpts := fastOptions("new")
	newOpts.OnHalt = func(h Halt) { halts <- h }
	newOpts.Retry.HaltedRetryInterval = 50 * time.Millisecond
	nb, err := tryStart(t, c, newOpts, newH)
	if err != nil {
		t.Fatal(err)
	}
	pub := NewPublisher(c)
	key := ownedKey(t, ctx, pub, nb, "the new build")
	stream := rdb.PartitionStream("order", key)
	id := addRaw(t, c, key, "testCancelled")
	if err := pub.Publish(ctx, ev(key, 2)); err != nil {
		t.Fatal(err)
	}
	var halt Halt
	eventually(t, 20*time.Second, "the new build to halt on the entry", func() bool {
		select {
		case halt = <-halts:
			return halt.EntryID == id
		default:
		}
		if ackedIn(t, c, stream, "deploy.h", id) && !oldRan.has(key) {
			t.Fatalf("the new build acked a testCancelled entry unrun while the old build, which routes it, is live")
		}
		return false
	})
	if halt.Permanent || !errors.Is(halt.Err, ErrRoutedByAnotherBuild) {
		t.Errorf("halt %+v: want one that is not permanent, with an error matching ErrRoutedByAnotherBuild", halt)
	}
	old.stop()
	eventually(t, 20*time.Second, "the entry acked once no live build routes it", func() bool { return ackedIn(t, c, stream, "deploy.h", id) })
}

// A handler that changed kind under its name is refused at Run while an
// instance of the other kind is live, and starts once that one stopped.
func TestDeployKindChangeRefused(t *testing.T) {
	cases := []struct {
		name     string
		old, new Registration
	}{
		{"keyed to unkeyed", keyedHandler("deploy.x", nop), unkeyedOrders("deploy.x", nop)},
		{"unkeyed to keyed", unkeyedOrders("deploy.x", nop), keyedHandler("deploy.x", nop)},
		{"plain pm to sequential", nonSequential(flowPM("deploy.x", noHook)), flowPM("deploy.x", noHook)},
		{"sequential pm to plain", flowPM("deploy.x", noHook), nonSequential(flowPM("deploy.x", noHook))},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newRedis(t)
			old, err := tryStart(t, c, fastOptions("old"), tc.old)
			if err != nil {
				t.Fatal(err)
			}
			r, err := tryStart(t, c, fastOptions("new"), tc.new)
			if !errors.Is(err, ErrKindChanged) {
				t.Fatalf("Run with the changed kind: %v, want an error matching ErrKindChanged", err)
			}
			r.stop()
			old.stop()
			if _, err := tryStart(t, c, fastOptions("new2"), tc.new); err != nil {
				t.Fatalf("Run once the other kind stopped: %v", err)
			}
		})
	}
}

// Run refuses with ErrUpgrade, naming it, while a live instance of an
// earlier release runs one of its handlers: one whose deploy record says
// no key layout (the previous release's, written here as it wrote it).
// Once it is gone it starts.
func TestUpgradeRefusedBesideEarlierRelease(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	opts := func(owner string) Options {
		o := fastOptions(owner)
		o.LeaseTTL = 30 * time.Second // the simulated members stay live
		return o
	}
	if err := rdb.LoadScripts(ctx, c); err != nil { // AnnounceAll pipelines EVALSHA
		t.Fatal(err)
	}
	// The previous release's instance "old1": its OwnerKey and its record.
	if err := c.Set(ctx, rdb.OwnerKey("old1"), "old1~a", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.HSet(ctx, rdb.DeployKey("deploy.k"), "old1", `v1|keyed|1|0123|{"incarnation":"old1~a","routes":{}}`).Err(); err != nil {
		t.Fatal(err)
	}
	_, err := tryStart(t, c, opts("a"), keyedHandler("deploy.k", nop), unkeyedOrders("deploy.u", nop))
	if !errors.Is(err, ErrUpgrade) || !strings.Contains(err.Error(), "old1") || !strings.Contains(err.Error(), "docs/upgrading.md") {
		t.Fatalf("Run beside an earlier release: %v, want ErrUpgrade naming old1 and docs/upgrading.md", err)
	}
	if n, _ := c.HLen(ctx, rdb.DeployKey("deploy.u")).Result(); n != 0 {
		t.Errorf("a refused Run recorded %d deploy records", n)
	}
	// A handler the earlier release does not run is no reason to refuse.
	r, err := tryStart(t, c, opts("b"), keyedHandler("deploy.other", nop))
	if err != nil {
		t.Fatalf("a handler no earlier release runs: %v", err)
	}
	r.stop()
	// Stopped: old1's OwnerKey ends.
	c.Del(ctx, rdb.OwnerKey("old1"))
	r, err = tryStart(t, c, opts("c"), keyedHandler("deploy.k", nop), unkeyedOrders("deploy.u", nop))
	if err != nil {
		t.Fatalf("once the earlier release stopped: %v", err)
	}
	r.stop()
}

// The deploy records work under the engine ACL line of docs/operating.md, the prune
// of a stopped instance's record (HDEL) included.
func TestDeployUnderDocumentedACL(t *testing.T) {
	s := redistest.New(t)
	args := append([]string{"ACL", "SETUSER", "seqby-engine"}, aclRules(t, "seqby-engine", "engine-secret", "order")...)
	if _, err := s.Do(args...); err != nil {
		t.Fatalf("ACL SETUSER: %v", err)
	}
	c := redis.NewClient(&redis.Options{Addr: s.Addr, Username: "seqby-engine", Password: "engine-secret", ContextTimeoutEnabled: true})
	t.Cleanup(func() { c.Close() })
	first, err := tryStart(t, c, fastOptions("first"), keyedHandler("deploy.h", nop))
	if err != nil {
		t.Fatal(err)
	}
	first.stop()
	if _, err := tryStart(t, c, fastOptions("second"), keyedHandler("deploy.h", nop)); err != nil {
		t.Fatal(err)
	}
	admin := redis.NewClient(&redis.Options{Addr: s.Addr})
	defer admin.Close()
	owners, err := admin.HKeys(context.Background(), rdb.DeployKey("deploy.h")).Result()
	if err != nil || len(owners) != 1 || owners[0] != "second" {
		t.Errorf("deploy records of %v, %v; want only the live instance's", owners, err)
	}
	log, err := admin.Do(context.Background(), "ACL", "LOG").Slice()
	if err != nil || len(log) > 0 {
		t.Fatalf("ACL LOG: %v, %v; want nothing refused", log, err)
	}
}
