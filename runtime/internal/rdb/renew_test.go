package rdb

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seqby/seqby/internal/redistest"
)

// RenewAll renews, in one call per slot, exactly the leases still holding
// their tokens, and reports the others lost; on a cluster the leases span
// slots and nodes.
func TestRenewAll(t *testing.T) {
	redistest.Topologies(t, func(t *testing.T, c redis.UniversalClient) {
		renewAll(t, c)
		cc, ok := c.(*redis.ClusterClient)
		if !ok {
			return
		}
		// slot agrees with the cluster's own hashing.
		for _, k := range []string{"foo", "order:{a}", "{a}:__lease__:h", "x{}y", "{}", "a{b", "{user1000}.following"} {
			want, err := cc.ClusterKeySlot(ctxT(t), k).Result()
			if err != nil {
				t.Fatal(err)
			}
			if got := slot(k); int64(got) != want {
				t.Errorf("slot(%q) = %d, CLUSTER KEYSLOT = %d", k, got, want)
			}
		}
	})
}

func renewAll(t *testing.T, c redis.UniversalClient) {
	ctx := ctxT(t)
	var leases []Lease
	for i := 0; i < 40; i++ {
		ref := PartitionLease(PartitionStream("order", fmt.Sprint("k", i)), "h")
		l, err := Acquire(ctx, c, ref, "o", time.Second)
		if err != nil {
			t.Fatal(err)
		}
		leases = append(leases, l)
	}
	// Lease 3 is gone, lease 5 taken by another token, lease 7's key a
	// hash (its fault alone).
	if err := c.Del(ctx, leases[7].Ref.Key).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.HSet(ctx, leases[7].Ref.Key, "x", "y").Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Del(ctx, leases[3].Ref.Key).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Set(ctx, leases[5].Ref.Key, "other:1", time.Second).Err(); err != nil {
		t.Fatal(err)
	}
	// A pipeline has no EVAL fallback: a cold script cache says so.
	if errs, _ := RenewAll(ctx, c, leases, nil, time.Minute); !IsNoScript(errs[0]) {
		t.Fatalf("before LoadScripts: %v, want NOSCRIPT", errs[0])
	}
	if err := LoadScripts(ctx, c); err != nil {
		t.Fatal(err)
	}
	errs, _ := RenewAll(ctx, c, leases, nil, time.Minute)
	if !Permanent(errs[7]) {
		t.Errorf("lease 7: %v, want a permanent error", errs[7])
	}
	for i, err := range errs {
		if i == 7 {
			continue
		}
		lost := i == 3 || i == 5
		if lost != errors.Is(err, ErrLeaseLost) || (!lost && err != nil) {
			t.Errorf("lease %d: %v", i, err)
		}
		ttl, _ := c.PTTL(ctx, leases[i].Ref.Key).Result()
		if renewed := ttl > 30*time.Second; renewed == lost {
			t.Errorf("lease %d: pttl %v after RenewAll", i, ttl)
		}
	}
}

// AcquireAll acquires free leases, reports held ones with their holder,
// and recovers from a flushed script cache in the same call.
func TestAcquireAll(t *testing.T) {
	c := newRedis(t)
	ctx := ctxT(t)
	refs := []LeaseRef{
		PartitionLease(PartitionStream("order", "a"), "h"),
		PartitionLease(PartitionStream("order", "b"), "h"),
		PartitionLease(PartitionStream("order", "c"), "h"),
	}
	if _, err := Acquire(ctx, c, refs[1], "other", time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := c.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	reqs := make([]AcquireReq, len(refs))
	for i, r := range refs {
		reqs[i] = AcquireReq{Ref: r}
	}
	leases, errs := AcquireAll(ctx, c, reqs, "me", time.Minute, 0)
	var held *HeldError
	if errs[0] != nil || errs[2] != nil || !errors.As(errs[1], &held) || !errors.Is(errs[1], ErrLeaseHeld) ||
		!strings.HasPrefix(held.Token, "other:") {
		t.Fatalf("errs = %v", errs)
	}
	for _, i := range []int{0, 2} {
		if v, _ := c.Get(ctx, refs[i].Key).Result(); v != leases[i].Token() || leases[i].Owner != "me" {
			t.Fatalf("lease %d: %q in Redis, %+v returned", i, v, leases[i])
		}
	}
}
