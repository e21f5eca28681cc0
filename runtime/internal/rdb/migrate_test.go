package rdb

import (
	"testing"
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
		legacyHandlerPauseKey("h"):       `{"by":"carol"}`,
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
		if err := MigrateLayout(ctx, c, []string{"h"}); err != nil {
			t.Fatalf("run %d: %v", run, err)
		}
		for _, f := range []struct{ key, field, want string }{
			{MetaKey(lease), MetaHalt, old[legacyHaltKey(stream, "h")]},
			{MetaKey(pm), MetaHalt, old[legacyPMHaltKey("h", "v")]},
			{MetaKey(lease), MetaPaused, old[legacyPauseKey(lease)]},
			{StateKey("h", "v"), MetaPaused, old[legacyPauseKey(pm)]},
			{MetaKey(lease2), MetaHalt, `{"new":true}`},
			{HandlerPauseKey("h"), MetaPaused, old[legacyHandlerPauseKey("h")]},
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
			legacyHaltKey(stream2, "h"), legacyHandlerPauseKey("h"), legacyHaltedKey("h"), legacyPausedKey("h"), legacyMaintenanceGeneration}
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
