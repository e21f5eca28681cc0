package rdb

import (
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seqby/seqby/internal/redistest"
)

// MigrateLayout moves the earlier layout's halts and pauses into the
// control hashes, lists them, removes the old keys and indexes, keeps a
// field this layout wrote since, and does the same when run again.
func TestMigrateLayout(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	stream := PartitionStream("order", "a")
	lease, pm := LeaseKey(stream, "h"), PMLeaseKey("h", "v")
	stream2 := PartitionStream("order", "b")
	lease2 := LeaseKey(stream2, "h")
	old := map[string]string{
		legacyHaltKey(stream, "h"):       `{"handler":"h","partition":"order:{a}"}`,
		legacyPMHaltKey("h", "v"):        `{"handler":"h","pm":true,"partition":"v"}`,
		legacyPauseKey(lease):            `{"by":"alice"}`,
		legacyPauseKey(pm):               `{"by":"bob"}`,
		legacyHaltKey(stream2, "h"):      `{"old":true}`,
		legacyControlKey("h"):            `{"by":"carol"}`,
		legacyGenerationKey(stream, "h"): "7",
		legacyMaintenanceGeneration:      "9",
	}
	for k, v := range old {
		if err := c.Set(ctx, k, v, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	c.SAdd(ctx, legacyHaltedKey("h"), legacyHaltKey(stream, "h"), legacyPMHaltKey("h", "v"), legacyHaltKey(stream2, "h"), "stale:__halt__:h")
	c.SAdd(ctx, legacyPausedKey("h"), legacyPauseKey(lease), legacyPauseKey(pm))
	// A halt this layout recorded since is kept.
	c.HSet(ctx, MetaKey(lease2), MetaHalt, `{"new":true}`)
	for run := range 2 {
		if left, err := MigrateLayout(ctx, c, []string{"h"}); err != nil || len(left) != 0 {
			t.Fatalf("run %d: left %v, %v", run, left, err)
		}
		for _, f := range []struct{ key, field, want string }{
			{MetaKey(lease), MetaHalt, old[legacyHaltKey(stream, "h")]},
			{MetaKey(pm), MetaHalt, old[legacyPMHaltKey("h", "v")]},
			{MetaKey(lease), MetaPaused, old[legacyPauseKey(lease)]},
			{StateKey("h", "v"), MetaPaused, old[legacyPauseKey(pm)]},
			{MetaKey(lease2), MetaHalt, `{"new":true}`},
			{ControlKey("h"), MetaPaused, old[legacyControlKey("h")]},
		} {
			if got := c.HGet(ctx, f.key, f.field).Val(); got != f.want {
				t.Errorf("run %d: %s %s = %q, want %q", run, f.key, f.field, got, f.want)
			}
		}
		marks := c.SMembers(ctx, MarksKey("h")).Val()
		if len(marks) != 3 {
			t.Errorf("run %d: listed %v, want the three control hashes", run, marks)
		}
		gone := []string{legacyHaltKey(stream, "h"), legacyPMHaltKey("h", "v"), legacyPauseKey(lease), legacyPauseKey(pm),
			legacyHaltKey(stream2, "h"), legacyControlKey("h"), legacyHaltedKey("h"), legacyPausedKey("h")}
		if n := c.Exists(ctx, gone...).Val(); n != 0 {
			t.Errorf("run %d: %d of the earlier layout's keys left", run, n)
		}
	}
	// The moved state reads as this layout's.
	hs, err := Halts(ctx, c, "h", true)
	if err != nil || len(hs) != 3 {
		t.Fatalf("Halts after the migration: %v, %v", hs, err)
	}
	ps, err := PausedMarks(ctx, c, "h", true)
	if err != nil || len(ps) != 2 || ps[MetaKey(lease)].By != "alice" || ps[StateKey("h", "v")].By != "bob" {
		t.Fatalf("PausedMarks after the migration: %v, %v", ps, err)
	}
}

// A lease's first acquire under this layout takes over the earlier
// layout's generation counter: a counter ahead of the Redis clock (a
// clock set back since the earlier release ran) still gives a higher
// generation, and the old counter is deleted.
func TestAcquireTakesOverLegacyGeneration(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	ahead := time.Now().Add(24 * time.Hour).UnixMicro()
	for _, ref := range []LeaseRef{
		PartitionLease(PartitionStream("order", "a"), "h"),
		PMLease("pm", "v", []string{PartitionStream("order", "v")}),
		MaintenanceLease(),
	} {
		if err := c.Set(ctx, ref.Legacy, strconv.FormatInt(ahead, 10), 0).Err(); err != nil {
			t.Fatal(err)
		}
		l, err := Acquire(ctx, c, ref, "o", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if l.Generation <= ahead {
			t.Errorf("%s: generation %d, want above the earlier layout's %d", ref.Key, l.Generation, ahead)
		}
		if c.Exists(ctx, ref.Legacy).Val() != 0 {
			t.Errorf("%s: the earlier layout's counter %s is left", ref.Key, ref.Legacy)
		}
	}
}

// Two engines starting at once both migrate: the result is one
// migration's, with nothing lost or listed twice.
func TestMigrateLayoutConcurrently(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	want := map[string]string{}
	for i := range 50 {
		stream := PartitionStream("order", strconv.Itoa(i))
		rec := `{"n":` + strconv.Itoa(i) + `}`
		c.Set(ctx, legacyHaltKey(stream, "h"), rec, 0)
		c.SAdd(ctx, legacyHaltedKey("h"), legacyHaltKey(stream, "h"))
		want[MetaKey(LeaseKey(stream, "h"))] = rec
	}
	errs := make(chan error, 2)
	for range 2 {
		go func() { _, err := MigrateLayout(ctx, c, []string{"h"}); errs <- err }()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for key, rec := range want {
		if got := c.HGet(ctx, key, MetaHalt).Val(); got != rec {
			t.Errorf("%s halt = %q, want %q", key, got, rec)
		}
	}
	if marks := c.SMembers(ctx, MarksKey("h")).Val(); len(marks) != len(want) {
		t.Errorf("%d control hashes listed, want %d", len(marks), len(want))
	}
	if n := c.Exists(ctx, legacyHaltedKey("h")).Val(); n != 0 {
		t.Errorf("the earlier layout's index is left")
	}
}

// On a cluster, an index member the earlier release could not have
// written (no hash tag: its control hash is in another slot) is left
// listed rather than failing the migration with CROSSSLOT.
func TestMigrateLayoutCluster(t *testing.T) {
	ctx := ctxT(t)
	cl := redistest.NewCluster(t, 3)
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { cc.Close() })
	good := legacyHaltKey(PartitionStream("order", "a"), "h")
	bad := "untagged:__halt__:h"
	if slot(bad) == slot(MetaKey(LeaseKey("untagged", "h"))) {
		t.Fatal("the untagged key shares its control hash's slot: pick another")
	}
	for _, k := range []string{good, bad} {
		if err := cc.Set(ctx, k, `{"k":"`+k+`"}`, 0).Err(); err != nil {
			t.Fatal(err)
		}
		cc.SAdd(ctx, legacyHaltedKey("h"), k)
	}
	if left, err := MigrateLayout(ctx, cc, []string{"h"}); err != nil || len(left) != 1 || left[0] != bad {
		t.Fatalf("MigrateLayout: left %v, %v; want %s left", left, err, bad)
	}
	if got := cc.HGet(ctx, MetaKey(LeaseKey(PartitionStream("order", "a"), "h")), MetaHalt).Val(); got != `{"k":"`+good+`"}` {
		t.Errorf("tagged record not moved: %q", got)
	}
	if left := cc.SMembers(ctx, legacyHaltedKey("h")).Val(); len(left) != 1 || left[0] != bad {
		t.Errorf("earlier index after the migration: %v, want only %s", left, bad)
	}
	if cc.Exists(ctx, bad).Val() != 1 {
		t.Errorf("the untagged record went")
	}
}
