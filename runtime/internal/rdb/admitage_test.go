package rdb

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seqby/seqby/internal/redistest"
)

// The admitted age read is the largest stored while it lasts: a lower
// one stored later (another incarnation's, or this one's late resend)
// does not lower it; members past their end go at the next store, and the
// set ends with its last member.
func TestAdmitAgeIsTheLargestWhileItLasts(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	if a, err := AdmitAge(ctx, c, "h"); err != nil || a != 0 {
		t.Fatalf("AdmitAge of nothing stored: %v, %v; want 0", a, err)
	}
	if err := StoreAdmitAge(ctx, c, "h", "o~1", 160*time.Millisecond+time.Microsecond, 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if err := StoreAdmitAge(ctx, c, "h", "o~1", 60*time.Millisecond, time.Minute); err != nil {
		t.Fatal(err)
	}
	if a, err := AdmitAge(ctx, c, "h"); err != nil || a != 161*time.Millisecond {
		t.Fatalf("AdmitAge: %v, %v; want 161ms (160ms and 1µs, rounded up), the largest", a, err)
	}
	if _, ends, _ := AdmitAgeRecords(ctx, c, "h"); ends["60|o~1"] < time.Now().Add(50*time.Second).UnixMilli() {
		t.Fatalf("the 60ms record ends at %d; want a minute on", ends["60|o~1"])
	}
	time.Sleep(400 * time.Millisecond)
	if err := StoreAdmitAge(ctx, c, "h", "o~2", 30*time.Millisecond, 100*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if a, err := AdmitAge(ctx, c, "h"); err != nil || a != 60*time.Millisecond {
		t.Fatalf("AdmitAge after the 161ms member ended: %v, %v; want 60ms", a, err)
	}
	if ms, ends, _ := AdmitAgeRecords(ctx, c, "h"); len(ms) != 2 || ends["60|o~1"] < time.Now().Add(50*time.Second).UnixMilli() {
		t.Fatalf("records %v ending %v; want 2, the ended one removed, the 60ms one still a minute", ms, ends)
	}
}

// A member whose end has passed counts no more, though no store has
// removed it yet: its engine stopped relying on it LeaseMargin before its
// end, so Pause need not wait it out (seen before AdmitAge read by Redis's
// clock: it read the ended member's 80ms until the next store).
func TestAdmitAgeLeavesEndedMembersOut(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	if err := StoreAdmitAge(ctx, c, "h", "o~1", 80*time.Millisecond, 100*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if err := StoreAdmitAge(ctx, c, "h", "o~2", 30*time.Millisecond, time.Minute); err != nil {
		t.Fatal(err)
	}
	if a, err := AdmitAge(ctx, c, "h"); err != nil || a != 80*time.Millisecond {
		t.Fatalf("AdmitAge while both last: %v, %v; want 80ms", a, err)
	}
	time.Sleep(150 * time.Millisecond)
	if ms, _, _ := AdmitAgeRecords(ctx, c, "h"); len(ms) != 2 {
		t.Fatalf("records %v; want both, no store since the first ended", ms)
	}
	if a, err := AdmitAge(ctx, c, "h"); err != nil || a != 30*time.Millisecond {
		t.Fatalf("AdmitAge after the 80ms member ended: %v, %v; want 30ms", a, err)
	}
}

// nodeHook records which node each command of a cluster client's went to.
type nodeHook struct {
	addr string
	mu   *sync.Mutex
	seen map[string][]string // command name -> node addresses
}

func (h nodeHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h nodeHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.note(cmd)
		return next(ctx, cmd)
	}
}
func (h nodeHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			h.note(cmd)
		}
		return next(ctx, cmds)
	}
}
func (h nodeHook) note(cmd redis.Cmder) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.seen[strings.ToLower(cmd.Name())] = append(h.seen[strings.ToLower(cmd.Name())], h.addr)
}

// On a Redis Cluster with replicas, the admitted age is read on the key's
// primary even through a client that reads from replicas (ReadOnly): a
// replica may not have a store the primary answered, and Pause would wait
// too little (seen before AdmitAge went through a script: its
// ZRANGEBYSCORE went to the replica).
func TestAdmitAgeOnAClusterWithReplicas(t *testing.T) {
	cl := redistest.NewClusterReplicas(t, 3, 1)
	ctx := ctxT(t)
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { c.Close() })
	primary, err := cl.PrimaryOf(ControlKey("h"))
	if err != nil {
		t.Fatal(err)
	}
	t.Run("read on the primary", func(t *testing.T) {
		if err := StoreAdmitAge(ctx, c, "h", "o~1", 90*time.Millisecond, time.Minute); err != nil {
			t.Fatal(err)
		}
		// A node names a replica in CLUSTER SLOTS, where a client learns
		// whom to read from, once it knows it replicated something.
		slot := Slot(ControlKey("h"))
		for _, addr := range cl.Addrs() {
			n := redis.NewClient(&redis.Options{Addr: addr})
			eventually(t, 20*time.Second, "the key's replica listed in CLUSTER SLOTS of "+addr, func() bool {
				for _, r := range n.ClusterSlots(ctx).Val() {
					if int(r.Start) <= slot && slot <= int(r.End) {
						return len(r.Nodes) == 2
					}
				}
				return false
			})
			n.Close()
		}
		var mu sync.Mutex
		seen := map[string][]string{}
		ro := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs(), ContextTimeoutEnabled: true, ReadOnly: true})
		t.Cleanup(func() { ro.Close() })
		ro.OnNewNode(func(n *redis.Client) { n.AddHook(nodeHook{addr: n.Options().Addr, mu: &mu, seen: seen}) })
		for range 10 {
			if a, err := AdmitAge(ctx, ro, "h"); err != nil || a != 90*time.Millisecond {
				t.Fatalf("AdmitAge through a ReadOnly client: %v, %v; want 90ms", a, err)
			}
		}
		mu.Lock()
		defer mu.Unlock()
		reads := 0
		for name, addrs := range seen {
			if name != "evalsha" && name != "eval" && name != "zrangebyscore" {
				continue
			}
			for _, a := range addrs {
				reads++
				if a != primary.Addr {
					t.Errorf("%s went to %s; want the key's primary %s", name, a, primary.Addr)
				}
			}
		}
		if reads < 10 {
			t.Fatalf("saw %d reads of the admitted age; want 10 (%v)", reads, seen)
		}
	})
	// The strict mode's WAIT goes to the key's own shard (the key has no
	// hash tag): a replica of another shard stopped does not stop it, the
	// key's own does.
	t.Run("strict store on the key's shard", func(t *testing.T) {
		var other *redistest.Server
		ps, err := cl.Primaries()
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range ps {
			if p != primary {
				if other, err = cl.ReplicaOf(p); err != nil {
					t.Fatal(err)
				}
				break
			}
		}
		own, err := cl.ReplicaOf(primary)
		if err != nil {
			t.Fatal(err)
		}
		resume := redistest.Paused(t, other)
		if err := StoreAdmitAgeAcked(ctx, c, "h", "o~1", 40*time.Millisecond, time.Minute, 1, 5*time.Second); err != nil {
			t.Fatalf("a store with another shard's replica stopped: %v", err)
		}
		resume()
		resume = redistest.Paused(t, own)
		if err := StoreAdmitAgeAcked(ctx, c, "h", "o~1", 50*time.Millisecond, time.Minute, 1, 100*time.Millisecond); !errors.Is(err, ErrAdmitAgeNotReplicated) {
			t.Fatalf("a store with the key's replica stopped: %v; want ErrAdmitAgeNotReplicated", err)
		}
		resume()
	})
}

// In the strict replication mode the store WAITs, on its own connection,
// for the replicas: fewer than asked is ErrAdmitAgeNotReplicated, and the engine
// does not rely on the age (seen before the store waited: every store
// below answered nil with the replica stopped).
func TestStoreAdmitAgeWaitsForReplicas(t *testing.T) {
	s := redistest.NewSentinel(t, 1, 0)
	ctx := ctxT(t)
	c := redis.NewClient(&redis.Options{Addr: s.Nodes[0].Addr, ContextTimeoutEnabled: true})
	t.Cleanup(func() { c.Close() })
	eventually(t, 20*time.Second, "the replica in sync", func() bool {
		info, err := c.Info(ctx, "replication").Result()
		return err == nil && strings.Contains(info, "state=online")
	})
	if err := StoreAdmitAgeAcked(ctx, c, "h", "o~1", 40*time.Millisecond, time.Minute, 1, 5*time.Second); err != nil {
		t.Fatalf("a store acknowledged by the one replica: %v", err)
	}
	if err := StoreAdmitAgeAcked(ctx, c, "h", "o~1", 40*time.Millisecond, time.Minute, 2, 100*time.Millisecond); !errors.Is(err, ErrAdmitAgeNotReplicated) {
		t.Fatalf("a store waiting for 2 replicas of one: %v; want ErrAdmitAgeNotReplicated", err)
	}
	resume := redistest.Paused(t, s.Nodes[1])
	if err := StoreAdmitAgeAcked(ctx, c, "h", "o~1", 50*time.Millisecond, time.Minute, 1, 100*time.Millisecond); !errors.Is(err, ErrAdmitAgeNotReplicated) {
		t.Fatalf("a store with the replica stopped: %v; want ErrAdmitAgeNotReplicated", err)
	}
	resume()
	// Its reply lost (Redis ran it), a strict store is sent again on a new
	// connection: one member, waited for on its replica (seen before
	// Resend: "Conn is in a bad state: EOF", the store not counted).
	lc, l := lossy(t, c, "admit_age")
	if err := StoreAdmitAgeAcked(ctx, lc, "h", "o~2", 60*time.Millisecond, time.Minute, 1, 5*time.Second); err != nil || l.Lost() != 1 {
		t.Fatalf("a strict store whose reply was lost (lost %d): %v; want stored", l.Lost(), err)
	}
	if ms, _, _ := AdmitAgeRecords(ctx, c, "h"); !slices.Equal(ms, []string{"40|o~1", "50|o~1", "60|o~2"}) {
		t.Fatalf("the records are %v; want 40|o~1, 50|o~1 and 60|o~2 once", ms)
	}
}
