package maintenance

import (
	"strings"
	"testing"

	"github.com/seqby/seqby/internal/logsink"
	"github.com/seqby/seqby/runtime/internal/rdb"
)

// Trim keeps what some registered group has not acked, on every lane it
// is given, and reports a lane it could not trim (logged, with the
// handler).
func TestTrim(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	stream := rdb.PartitionStream("order", "a")
	for _, g := range []string{"h1", "h2"} {
		if _, err := rdb.RegisterGroup(ctx, c, "order", g, false); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		if err := rdb.Publish(ctx, c, "order", "a", stream, 100, []any{"n", "1"}, rdb.Once{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, g := range []string{"h1", "h2"} {
		if _, err := rdb.CreateGroup(ctx, c, stream, g, false); err != nil {
			t.Fatal(err)
		}
	}
	ens, err := rdb.ReadGroup(ctx, c, stream, "h1", "o:1", ">", 10, -1)
	if err != nil || len(ens) != 3 {
		t.Fatalf("read %v, %v", ens, err)
	}
	for _, en := range ens {
		c.XAck(ctx, stream, "h1", en.ID)
	}
	ens2, err := rdb.ReadGroup(ctx, c, stream, "h2", "o:2", ">", 1, -1)
	if err != nil || len(ens2) != 1 {
		t.Fatalf("read %v, %v", ens2, err)
	}
	c.XAck(ctx, stream, "h2", ens2[0].ID)
	var logs logsink.Buffer
	m := New(testConfig(c, "t1", &logs))
	if !m.Trim(ctx, "h1", []string{"order"}, []string{stream}) {
		t.Fatalf("trim failed:\n%s", logs.String())
	}
	if n := c.XLen(ctx, stream).Val(); n != 2 {
		t.Fatalf("%d entries left, want the 2 h2 has not acked", n)
	}
	// A category whose groups hash holds a string cannot be trimmed.
	c.Set(ctx, rdb.GroupsKey("bad"), "x", 0)
	if m.Trim(ctx, "h1", []string{"bad"}, []string{rdb.PartitionStream("bad", "a")}) {
		t.Fatal("a trim that could not read the groups reported success")
	}
	if !strings.Contains(logs.String(), "trimming acked entries failed") || !strings.Contains(logs.String(), "handler=h1") {
		t.Fatalf("the failure was not logged with its handler:\n%s", logs.String())
	}
}
