package rdb

import (
	"errors"
	"fmt"
	"strconv"
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

// One renew_many call carries leases with and without attempt marks, with
// and without wake pairs: only the marked ones' marks move, with their
// leases; and a mark Redis refuses to extend (a write at maxmemory, the
// call's first) leaves its lease unrenewed too, as a transient error.
func TestRenewAllMarks(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	sa, sb := PartitionStream("o", "a"), PartitionStream("o", "b")
	pa, pb := PartitionStream("x", "v"), PartitionStream("y", "v")
	for _, s := range []string{sa, sb, pa, pb} {
		c.XAdd(ctx, &redis.XAddArgs{Stream: s, Values: []any{"n", "1"}})
	}
	refs := []LeaseRef{PartitionLease(sa, "g"), MaintenanceLease(), PMLease("pm", "v", []string{pa, pb}), PartitionLease(sb, "g")}
	var ls []Lease
	for _, r := range refs {
		l, err := Acquire(ctx, c, r, "p1", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
	}
	for _, i := range []int{1, 2, 3} {
		if err := ls[i].BeginAttempt(ctx, c, time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	mark := func(i int) int64 {
		m := c.HGet(ctx, refs[i].Meta, MetaAttempt).Val()
		e, _ := strconv.ParseInt(m[strings.LastIndexByte(m, ' ')+1:], 10, 64)
		return e
	}
	unmarked := mark(3)
	if err := LoadScripts(ctx, c); err != nil {
		t.Fatal(err)
	}
	errs, named := RenewAll(ctx, c, ls, []bool{false, true, true, false}, time.Hour)
	now := time.Now().UnixMilli()
	for i := range ls {
		if errs[i] != nil {
			t.Fatalf("lease %d: %v", i, errs[i])
		}
		if p := c.PTTL(ctx, refs[i].Key).Val(); p < 50*time.Minute {
			t.Errorf("lease %d: PTTL %v after an hour's renewal", i, p)
		}
	}
	for _, i := range []int{1, 2} {
		if e := mark(i); e < now+3_500_000 {
			t.Errorf("mark %d not extended with its lease: %d", i, e)
		}
	}
	if mark(3) != unmarked {
		t.Errorf("an unmarked lease's mark was extended")
	}
	if len(named[0]) != 1 || named[1] != nil || len(named[2]) != 2 || len(named[3]) != 1 {
		t.Errorf("named %v, want the wake flags of leases 0, 2 and 3", named)
	}
	c.ConfigSet(ctx, "maxmemory-policy", "noeviction")
	c.ConfigSet(ctx, "maxmemory", "1")
	t.Cleanup(func() { c.ConfigSet(ctx, "maxmemory", "0") })
	before, m1 := c.PTTL(ctx, refs[1].Key).Val(), mark(1)
	errs, _ = RenewAll(ctx, c, ls[1:2], []bool{true}, 2*time.Hour)
	if !errors.Is(errs[0], errAttemptMark) || Permanent(errs[0]) {
		t.Fatalf("renewal whose mark was refused: %v, want errAttemptMark, transient", errs[0])
	}
	if after := c.PTTL(ctx, refs[1].Key).Val(); after > before || mark(1) != m1 {
		t.Fatalf("the lease (PTTL %v, was %v) or its mark moved without the other", after, before)
	}
}
