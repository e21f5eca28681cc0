package rdb

import (
	"testing"

	"github.com/redis/go-redis/v9"
)

// Trim keeps every entry some registered group has not acked: a group's
// oldest pending entry and everything after it, everything a registered
// group has not read (creating it from 0 when missing), and removes the
// rest; a stream every group has acked ends empty.
func TestTrim(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	stream := PartitionStream("order", "a")
	var ids []string
	for range 5 {
		id, err := c.XAdd(ctx, &redis.XAddArgs{Stream: stream, Values: []any{"v", "x"}}).Result()
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	read := func(group string, n int64, ack int) {
		t.Helper()
		// Trim creates a registered group it finds missing.
		if err := c.XGroupCreate(ctx, stream, group, "0").Err(); err != nil && err.Error() != "BUSYGROUP Consumer Group name already exists" {
			t.Fatal(err)
		}
		res, err := c.XReadGroup(ctx, &redis.XReadGroupArgs{Group: group, Consumer: "c", Streams: []string{stream, ">"}, Count: n, Block: -1}).Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range res[0].Messages[:ack] {
			c.XAck(ctx, stream, group, m.ID)
		}
	}
	for _, g := range []string{"fast", "slow", "absent"} {
		if _, err := RegisterGroup(ctx, c, "order", g, false); err != nil {
			t.Fatal(err)
		}
	}
	read("fast", 5, 5) // read and acked everything
	read("slow", 4, 2) // acked 1 and 2; 3 and 4 pending; 5 unread
	steps := []struct {
		name    string
		prepare func()
		first   string // first id left, "" when empty
	}{
		{"a registered group has read nothing", func() {}, ids[0]},
		{"the slow group's oldest pending entry", func() { read("absent", 5, 5) }, ids[2]},
		{"the slow group's unread entry", func() { c.XAck(ctx, stream, "slow", ids[2], ids[3]) }, ids[4]},
		{"everything acked", func() {
			c.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "slow", Consumer: "c", Streams: []string{stream, ">"}, Count: 1, Block: -1})
			c.XAck(ctx, stream, "slow", ids[4])
		}, ""},
	}
	for _, s := range steps {
		s.prepare()
		if _, err := trimCategory(ctx, c, "order", stream); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		left, _ := c.XRange(ctx, stream, "-", "+").Result()
		first := ""
		if len(left) > 0 {
			first = left[0].ID
		}
		if first != s.first {
			t.Fatalf("%s: first entry left %q, want %q", s.name, first, s.first)
		}
	}
	if n, _ := c.Exists(ctx, stream).Result(); n != 1 {
		t.Fatal("the trimmed stream was deleted: its groups must stay")
	}
}

// A new group starts from the first retained entry, or, registered with
// onlyNew, from its first registration; a group registered before keeps
// its start.
func TestRegisterGroup(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	if s, err := RegisterGroup(ctx, c, "order", "a", false); err != nil || s != "0" {
		t.Fatalf("retained: %q, %v", s, err)
	}
	s, err := RegisterGroup(ctx, c, "order", "b", true)
	if err != nil || s == "0" || s[len(s)-2:] != "-0" {
		t.Fatalf("new: %q, %v", s, err)
	}
	if again, _ := RegisterGroup(ctx, c, "order", "b", false); again != s {
		t.Fatalf("re-registered start %q, want the first %q", again, s)
	}
}
