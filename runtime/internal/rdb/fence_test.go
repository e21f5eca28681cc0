package rdb

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func TestFencedReadAndAck(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	stream, group := "order:a", "h"
	for _, v := range []string{"1", "2"} {
		c.XAdd(ctx, &redis.XAddArgs{Stream: stream, Values: []any{"v", v}})
	}
	ref := PartitionLease(stream, group)
	l1, err := Acquire(ctx, c, ref, "p1", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Reclaim(ctx, c, l1, group, []string{stream}); err != nil {
		t.Fatal(err)
	}
	e, ok, err := FencedRead(ctx, c, l1, group, []string{stream}, nil)
	if err != nil || !ok || e.Fields["v"] != "1" {
		t.Fatalf("first read: %+v %v %v", e, ok, err)
	}
	// Unacked, the same head is read again (own PEL before new entries).
	again, _, _ := FencedRead(ctx, c, l1, group, []string{stream}, nil)
	if again.ID != e.ID {
		t.Fatalf("re-read gave %s, want pending head %s", again.ID, e.ID)
	}

	// The lease moves on: l1 is stale on read and on ack.
	c.Del(ctx, ref.Key)
	l2, err := Acquire(ctx, c, ref, "p2", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := FencedRead(ctx, c, l1, group, []string{stream}, nil); !errors.Is(err, ErrFenced) {
		t.Fatalf("stale read: %v, want ErrFenced", err)
	}
	if err := FencedAck(ctx, c, l1, group, stream, e.ID); !errors.Is(err, ErrFenced) {
		t.Fatalf("stale ack: %v, want ErrFenced", err)
	}
	if n := c.XPending(ctx, stream, group).Val().Count; n != 1 {
		t.Fatalf("stale ack changed the PEL: %d pending", n)
	}

	// Reclaim moves the pending head to the new owner and forgets p1:1.
	moved, err := Reclaim(ctx, c, l2, group, []string{stream})
	if err != nil || moved != 1 {
		t.Fatalf("reclaim: %d %v", moved, err)
	}
	pend := c.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: stream, Group: group, Start: "-", End: "+", Count: 10}).Val()
	if len(pend) != 1 || pend[0].Consumer != l2.Token() || pend[0].ID != e.ID {
		t.Fatalf("pending after reclaim: %+v", pend)
	}
	for _, cons := range c.XInfoConsumers(ctx, stream, group).Val() {
		if cons.Name == l1.Token() {
			t.Fatalf("past generation consumer %s still in the group", cons.Name)
		}
	}
	got, ok, err := FencedRead(ctx, c, l2, group, []string{stream}, nil)
	if err != nil || !ok || got.ID != e.ID {
		t.Fatalf("new owner read %+v %v %v, want reclaimed head first", got, ok, err)
	}
	if err := FencedAck(ctx, c, l2, group, stream, got.ID); err != nil {
		t.Fatal(err)
	}
	next, ok, _ := FencedRead(ctx, c, l2, group, []string{stream}, nil)
	if !ok || next.Fields["v"] != "2" {
		t.Fatalf("after ack read %+v, want entry 2", next)
	}
	FencedAck(ctx, c, l2, group, stream, next.ID)
	if _, ok, err := FencedRead(ctx, c, l2, group, []string{stream}, nil); ok || err != nil {
		t.Fatalf("drained stream read ok=%v err=%v", ok, err)
	}
}

func TestFencedReadBackfillAfterPrimary(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	primary, backfill, group := "order:a", "order:a:backfill", "h"
	c.XAdd(ctx, &redis.XAddArgs{Stream: backfill, Values: []any{"v", "old"}})
	c.XAdd(ctx, &redis.XAddArgs{Stream: primary, Values: []any{"v", "new"}})
	l, _ := Acquire(ctx, c, PartitionLease(primary, group), "p1", time.Minute)
	lanes := []string{primary, backfill}
	Reclaim(ctx, c, l, group, lanes)
	var got []string
	for {
		e, ok, err := FencedRead(ctx, c, l, group, lanes, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		got = append(got, e.Stream+"="+e.Fields["v"])
		if err := FencedAck(ctx, c, l, group, e.Stream, e.ID); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"order:a=new", "order:a:backfill=old"}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("read %v, want %v", got, want)
	}
}

func TestFencedReadMissingLanes(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	l, _ := Acquire(ctx, c, PartitionLease("order:none", "h"), "p1", time.Minute)
	if n, err := Reclaim(ctx, c, l, "h", []string{"order:none", "order:none:backfill"}); err != nil || n != 0 {
		t.Fatalf("reclaim of missing streams: %d %v", n, err)
	}
	if _, ok, err := FencedRead(ctx, c, l, "h", []string{"order:none", "order:none:backfill"}, nil); ok || err != nil {
		t.Fatalf("read of missing streams: %v %v", ok, err)
	}
	// A lane that appears after the claim gets its group on first read.
	c.XAdd(ctx, &redis.XAddArgs{Stream: "order:none:backfill", Values: []any{"v", "late"}})
	e, ok, err := FencedRead(ctx, c, l, "h", []string{"order:none", "order:none:backfill"}, nil)
	if !ok || err != nil || e.Fields["v"] != "late" || e.Stream != "order:none:backfill" {
		t.Fatalf("read of a late lane: %+v %v %v", e, ok, err)
	}
}

// The ack riding on a read is fenced with it: a stale token acks nothing;
// the owner's token acks the entry and reads the next in one call. An
// entry delivered by a read whose reply was lost comes first at the next
// read.
func TestFencedReadCarriesTheAck(t *testing.T) {
	c := newRedis(t)
	ctx := ctxT(t)
	const group = "h"
	stream := PartitionStream("order", "k")
	lanes := []string{stream}
	for i := 0; i < 3; i++ {
		if err := c.XAdd(ctx, &redis.XAddArgs{Stream: stream, Values: []string{"n", fmt.Sprint(i)}}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.XGroupCreate(ctx, stream, group, "0").Err(); err != nil {
		t.Fatal(err)
	}
	l, err := Acquire(ctx, c, PartitionLease(stream, group), "o", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	first, ok, err := FencedRead(ctx, c, l, group, lanes, nil)
	if err != nil || !ok || first.Pending || first.Deliveries != 1 {
		t.Fatalf("first read: %+v %v %v", first, ok, err)
	}
	stale := l
	stale.Generation--
	if _, _, err := FencedRead(ctx, c, stale, group, lanes, &first); !errors.Is(err, ErrFenced) {
		t.Fatalf("stale read: %v, want ErrFenced", err)
	}
	if n, _ := c.XPending(ctx, stream, group).Result(); n.Count != 1 {
		t.Fatalf("a fenced read acked: %d pending", n.Count)
	}
	second, ok, err := FencedRead(ctx, c, l, group, lanes, &first)
	if err != nil || !ok || second.ID == first.ID {
		t.Fatalf("second read: %+v %v %v", second, ok, err)
	}
	p, _ := c.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: stream, Group: group, Start: "-", End: "+", Count: 10}).Result()
	if len(p) != 1 || p[0].ID != second.ID {
		t.Fatalf("pending %v, want only the second entry", p)
	}
	// The second entry is pending: skipping the pending pass would pass it
	// by, so the read that must return it does not skip.
	again, ok, err := FencedRead(ctx, c, l, group, lanes, nil)
	if err != nil || !ok || again.ID != second.ID || !again.Pending || again.Deliveries != 2 {
		t.Fatalf("pending read: %+v %v %v", again, ok, err)
	}
	if third, ok, err := FencedRead(ctx, c, l, group, lanes, &again); err != nil || !ok || third.ID == second.ID || third.Pending {
		t.Fatalf("a skipping read returned %+v %v %v", third, ok, err)
	}
	if _, _, err := FencedRead(ctx, c, l, group, lanes, &Entry{Stream: "elsewhere", ID: "1-0"}); err == nil {
		t.Fatal("an ack of an entry on another stream must be refused")
	}
}

// Entries read ahead are pending under the owner, each with one delivery
// counted; a successor takes them over oldest first, one at a time, and a
// read ahead never takes more than one entry of a later lane.
func TestFencedReadAhead(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	const group = "h"
	stream := PartitionStream("order", "k")
	backfill := stream + ":backfill"
	lanes := []string{stream, backfill}
	for i := 0; i < 5; i++ {
		c.XAdd(ctx, &redis.XAddArgs{Stream: stream, Values: []string{"n", fmt.Sprint(i)}})
		c.XAdd(ctx, &redis.XAddArgs{Stream: backfill, Values: []string{"n", fmt.Sprint(i)}})
	}
	ref := PartitionLease(stream, group)
	l1, err := Acquire(ctx, c, ref, "p1", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Reclaim(ctx, c, l1, group, lanes); err != nil {
		t.Fatal(err)
	}
	es, more, err := FencedReadAhead(ctx, c, l1, group, lanes, 3, nil)
	if err != nil || len(es) != 3 || !more {
		t.Fatalf("read ahead: %+v more=%v %v", es, more, err)
	}
	for i, e := range es {
		if e.Fields["n"] != fmt.Sprint(i) || e.Stream != stream || e.Deliveries != 1 || e.Pending {
			t.Fatalf("entry %d read ahead: %+v", i, e)
		}
	}
	counts := func() []int64 {
		p := c.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: stream, Group: group, Start: "-", End: "+", Count: 10}).Val()
		var n []int64
		for _, x := range p {
			n = append(n, x.RetryCount)
		}
		return n
	}
	if got := fmt.Sprint(counts()); got != "[1 1 1]" {
		t.Fatalf("delivery counts after a read ahead: %s, want [1 1 1]", got)
	}
	// The owner acks the first, runs the second, and dies.
	if err := FencedAck(ctx, c, l1, group, stream, es[0].ID); err != nil {
		t.Fatal(err)
	}
	c.Del(ctx, ref.Key)
	l2, err := Acquire(ctx, c, ref, "p2", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := FencedAck(ctx, c, l1, group, stream, es[1].ID); !errors.Is(err, ErrFenced) {
		t.Fatal("a past owner's ack must be fenced")
	}
	if _, err := Reclaim(ctx, c, l2, group, lanes); err != nil {
		t.Fatal(err)
	}
	var got, reads []string
	var ack *Entry
	for {
		es, more, err := FencedReadAhead(ctx, c, l2, group, lanes, 3, ack)
		if err != nil {
			t.Fatal(err)
		}
		reads = append(reads, fmt.Sprintf("%d/%v", len(es), more))
		if len(es) == 0 {
			break
		}
		if es[0].Stream == backfill && len(es) != 1 {
			t.Fatalf("a read ahead took %d entries of the backfill lane", len(es))
		}
		for i := range es {
			e := es[i]
			got = append(got, fmt.Sprintf("%s/%s:%d", e.Stream[len(stream):], e.Fields["n"], e.Deliveries))
			if i < len(es)-1 {
				if err := FencedAck(ctx, c, l2, group, e.Stream, e.ID); err != nil {
					t.Fatal(err)
				}
			}
			ack = &e
		}
	}
	// 1 ran on p1 (in flight at its end) and 2 was read ahead by p1 and
	// never ran: both count a delivery for p1 and one for p2.
	want := "[/1:2 /2:2 /3:1 /4:1 :backfill/0:1 :backfill/1:1 :backfill/2:1 :backfill/3:1 :backfill/4:1]"
	if fmt.Sprint(got) != want {
		t.Fatalf("successor read\n %v\nwant\n %v", got, want)
	}
	// Whether more may wait: after pending entries, a full read (the
	// backfill lane is read one at a time) or one with the backfill lane
	// there, yes.
	if want := "[1/true 1/true 2/true 1/true 1/true 1/true 1/true 1/true 0/false]"; fmt.Sprint(reads) != want {
		t.Fatalf("reads (entries/more) %v, want %s", reads, want)
	}
	// A read that is not full, with no other lane: nothing more.
	other := PartitionStream("order", "other")
	for i := 0; i < 2; i++ {
		c.XAdd(ctx, &redis.XAddArgs{Stream: other, Values: []string{"n", fmt.Sprint(i)}})
	}
	l3, err := Acquire(ctx, c, PartitionLease(other, group), "p3", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Reclaim(ctx, c, l3, group, []string{other, other + ":backfill"}); err != nil {
		t.Fatal(err)
	}
	if es, more, err := FencedReadAhead(ctx, c, l3, group, []string{other, other + ":backfill"}, 3, nil); len(es) != 2 || more || err != nil {
		t.Fatalf("a read of 2 of 3 with no backfill lane: %d entries, more=%v, %v; want 2, false", len(es), more, err)
	}
	if n := c.XPending(ctx, stream, group).Val().Count; n != 0 {
		t.Fatalf("%d entries left pending", n)
	}
}
