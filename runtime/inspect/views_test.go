package inspect

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seqby/seqby/runtime/internal/rdb"
)

// A ReadOnly Inspector's listings leave what they find stale (a halt
// record whose head is no longer pending, a pause listing whose mark is
// gone) and still leave it out; the default Inspector tidies them.
func TestReadOnly(t *testing.T) {
	c := newRedis(t)
	ctx := ctxT(t)
	if _, err := rdb.RegisterGroup(ctx, c, "shop", "orders", false); err != nil {
		t.Fatal(err)
	}
	publish(t, c, "shop", "a", 1)
	r := halt(t, c, "orders", "shop", "a")
	if err := c.XAck(ctx, r.Stream, "orders", r.EntryID).Err(); err != nil {
		t.Fatal(err)
	}
	stale := rdb.MetaKey(rdb.LeaseKey("shop:{zz}", "orders"))
	c.SAdd(ctx, rdb.MarksKey("orders"), stale)
	ro := New(c).ReadOnly()
	if hs, err := ro.Halts(ctx, ""); err != nil || len(hs) != 0 {
		t.Fatalf("ReadOnly Halts: %+v, %v, want none", hs, err)
	}
	if in, err := ro.Inspect(ctx, "orders", "shop:{a}"); err != nil || !in.Stale || in.Halt != nil {
		t.Fatalf("ReadOnly Inspect: %+v, %v, want Stale", in, err)
	}
	if ps, err := ro.Paused(ctx, "orders"); err != nil || len(ps) != 0 {
		t.Fatalf("ReadOnly Paused: %+v, %v, want none", ps, err)
	}
	if !c.HExists(ctx, r.RecordKey(), rdb.MetaHalt).Val() {
		t.Fatal("a ReadOnly listing removed the stale halt record")
	}
	if !c.SIsMember(ctx, rdb.MarksKey("orders"), stale).Val() {
		t.Fatal("a ReadOnly listing removed the stale pause listing")
	}
	if _, err := New(c).Paused(ctx, "orders"); err != nil {
		t.Fatal(err)
	}
	if _, err := New(c).Halts(ctx, ""); err != nil {
		t.Fatal(err)
	}
	if c.HExists(ctx, r.RecordKey(), rdb.MetaHalt).Val() || c.SIsMember(ctx, rdb.MarksKey("orders"), stale).Val() {
		t.Fatal("the default Inspector left the stale record or listing")
	}
}

// Instances tells the live members (their heartbeats' owned-count record
// is there) from the silent ones.
func TestInstancesLive(t *testing.T) {
	c := newRedis(t)
	ctx := ctxT(t)
	if err := rdb.LoadScripts(ctx, c); err != nil {
		t.Fatal(err)
	}
	now := float64(time.Now().UnixMilli())
	c.ZAdd(ctx, rdb.MembersKey("orders"), redis.Z{Score: now, Member: "w1"}, redis.Z{Score: now - 30000, Member: "w2"})
	if err := rdb.AnnounceAll(ctx, c, []string{"orders"}, []int{3}, "w1", time.Minute); err != nil {
		t.Fatal(err)
	}
	is, err := New(c).Instances(ctx, "orders")
	if err != nil || len(is) != 2 || is[0].Owner != "w1" || !is[0].Live || is[1].Owner != "w2" || is[1].Live {
		t.Fatalf("Instances: %+v, %v, want w1 live, then w2 silent", is, err)
	}
	if is, err := New(c).Instances(ctx, "none"); err != nil || len(is) != 0 {
		t.Fatalf("Instances of a handler without members: %+v, %v", is, err)
	}
}
