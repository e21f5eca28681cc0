package worker

import (
	"fmt"
	"testing"
	"time"

	"github.com/seqby/seqby/runtime/internal/contract"
	"github.com/seqby/seqby/runtime/internal/rdb"
)

// A lease counted lost by the local deadline alone may still hold the
// owner's token in Redis; finish releases it (compare-and-delete) so the
// next owner need not wait for the TTL.
func TestDeadlineLostLeaseIsReleased(t *testing.T) {
	c, s, w, _ := testWorker(t, time.Minute, time.Now().Add(-time.Hour))
	<-w.held.Context().Done() // the deadline is long past: the timer fires at once
	w.finish()
	ctx := ctxT(t)
	if v, err := c.Get(ctx, w.held.Lease().Ref.Key).Result(); err == nil {
		t.Fatalf("lease %s still holds %q after finish; the successor waits a full TTL", w.held.Lease().Ref.Key, v)
	}
	if s.Has(w.ID()) {
		t.Error("the finished worker is still in the set")
	}
}

// Status returns copies: changing a returned Halt leaves the worker's.
func TestStatusReturnsHaltCopies(t *testing.T) {
	_, s, w, _ := testWorker(t, time.Minute, time.Now())
	w.mu.Lock()
	w.halt = &contract.Halt{Handler: "orders", Reason: "poison"}
	w.mu.Unlock()
	st := s.Status()
	if len(st) != 1 || !st[0].Halted || st[0].Halt == nil {
		t.Fatalf("status: %+v", st)
	}
	st[0].Halt.Reason = "changed by the caller"
	if got := s.Status()[0].Halt.Reason; got != "poison" {
		t.Fatalf("the worker's halt changed through Status: reason %q", got)
	}
}

// A keyed owner crashes while handling a backfill entry B; a primary entry
// P arrives; the next owner must re-run B before applying P.
func TestReclaimedBackfillHeadReadFirst(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	lanes := []string{"order:{a}", "order:{a}:backfill"}
	ref := rdb.PartitionLease("order:{a}", "g")
	xadd(t, c, lanes[1], "1-1", "B")
	old, _ := rdb.Acquire(ctx, c, ref, "old", time.Minute)
	if _, err := rdb.Reclaim(ctx, c, old, "g", lanes); err != nil {
		t.Fatal(err)
	}
	en, ok, err := rdb.FencedRead(ctx, c, old, "g", lanes, nil)
	if !ok || err != nil || en.ID != "1-1" {
		t.Fatalf("old owner's read: %v %v %v", en, ok, err)
	}
	c.Del(ctx, ref.Key) // old crashes; its lease expires
	xadd(t, c, lanes[0], "2-1", "P")
	nw, _ := rdb.Acquire(ctx, c, ref, "new", time.Minute)
	if n, err := rdb.Reclaim(ctx, c, nw, "g", lanes); err != nil || n != 1 {
		t.Fatalf("reclaim: %d %v", n, err)
	}
	en, ok, err = rdb.FencedRead(ctx, c, nw, "g", lanes, nil)
	if !ok || err != nil || en.ID != "1-1" || en.Stream != lanes[1] {
		t.Fatalf("new owner read %s %s first (%v %v); want the reclaimed backfill head 1-1", en.Stream, en.ID, ok, err)
	}
}

// The same for a sequential pm: the in-flight backfill head of a crashed
// owner comes before a newer primary entry.
func TestPMReclaimedBackfillHeadReadFirst(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	lanes := []string{"order:{x}", "payment:{x}", "order:{x}:backfill", "payment:{x}:backfill"}
	ref := rdb.PMLease("flow", "x", nil)
	xadd(t, c, lanes[3], "1-1", "B")
	old, _ := rdb.Acquire(ctx, c, ref, "old", time.Minute)
	if _, err := rdb.Reclaim(ctx, c, old, "flow", lanes); err != nil {
		t.Fatal(err)
	}
	en, ok, err := rdb.FencedReadOldest(ctx, c, old, "flow", lanes, 2, nil)
	if !ok || err != nil || en.ID != "1-1" {
		t.Fatalf("old owner's read: %v %v %v", en, ok, err)
	}
	c.Del(ctx, ref.Key)
	xadd(t, c, lanes[0], "2-1", "P")
	nw, _ := rdb.Acquire(ctx, c, ref, "new", time.Minute)
	if n, err := rdb.Reclaim(ctx, c, nw, "flow", lanes); err != nil || n != 1 {
		t.Fatalf("reclaim: %d %v", n, err)
	}
	en, ok, err = rdb.FencedReadOldest(ctx, c, nw, "flow", lanes, 2, nil)
	if !ok || err != nil || en.ID != "1-1" || en.Stream != lanes[3] {
		t.Fatalf("new owner read %s %s first (%v %v); want the reclaimed backfill head 1-1", en.Stream, en.ID, ok, err)
	}
}

// A pm applies the oldest entry across its streams, and looking at a
// stream's next entry does not deliver it: only the returned entry is
// ever pending, so "pending first" never puts a newer entry first.
func TestPMReadOldestDeliversOnlyWhatItReturns(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	lanes := []string{"order:{x}", "payment:{x}", "order:{x}:backfill", "payment:{x}:backfill"}
	xadd(t, c, lanes[1], "1-1", "Q1")
	xadd(t, c, lanes[1], "2-1", "Q2")
	xadd(t, c, lanes[0], "3-1", "P1")
	xadd(t, c, lanes[2], "4-1", "B1")
	l, _ := rdb.Acquire(ctx, c, rdb.PMLease("flow", "x", nil), "o", time.Minute)
	if _, err := rdb.Reclaim(ctx, c, l, "flow", lanes); err != nil {
		t.Fatal(err)
	}
	var got []string
	for range 5 {
		en, ok, err := rdb.FencedReadOldest(ctx, c, l, "flow", lanes, 2, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		got = append(got, en.Fields["n"])
		for _, s := range lanes {
			if s == en.Stream {
				continue
			}
			if p, _ := c.XPending(ctx, s, "flow").Result(); p != nil && p.Count > 0 {
				t.Fatalf("after reading %s, %s has %d pending entries it never returned", en.ID, s, p.Count)
			}
		}
		if err := rdb.FencedAck(ctx, c, l, "flow", en.Stream, en.ID); err != nil {
			t.Fatal(err)
		}
	}
	if fmt.Sprint(got) != "[Q1 Q2 P1 B1]" {
		t.Fatalf("applied %v, want [Q1 Q2 P1 B1]", got)
	}
}
