package runtime

import (
	"context"
	"fmt"
	"testing"
	"time"
)

func owned(rs ...*running) []int {
	out := make([]int, len(rs))
	for i, r := range rs {
		out[i] = len(r.Status().Partitions)
	}
	return out
}

func TestEngineFairShareScaleOutAndLeave(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	p := NewPublisher(c, PublisherOptions{})
	const parts = 8
	for i := range parts {
		if err := p.Publish(ctx, ev(fmt.Sprintf("k%d", i), 1)); err != nil {
			t.Fatal(err)
		}
	}
	h := keyedHandler("orders", func(context.Context, *testEvent) error { return nil })
	p1 := startEngine(t, c, fastOptions("p1"), h)
	eventually(t, 20*time.Second, "p1 owns all", func() bool { return owned(p1)[0] == parts })

	p2 := startEngine(t, c, fastOptions("p2"), h)
	eventually(t, 20*time.Second, "two share evenly", func() bool {
		o := owned(p1, p2)
		return o[0] == 4 && o[1] == 4
	})

	p3 := startEngine(t, c, fastOptions("p3"), h)
	eventually(t, 20*time.Second, "three share fairly", func() bool {
		o := owned(p1, p2, p3)
		return o[0]+o[1]+o[2] == parts && max(o[0], o[1], o[2]) <= 3
	})

	p1.stop() // graceful: hands over at once
	eventually(t, 20*time.Second, "two left share all", func() bool {
		o := owned(p2, p3)
		return o[0] == 4 && o[1] == 4
	})
}

func TestEngineUnkeyedHandlers(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	notes := make(chan string, 10)
	noteH := Registration{Name: "notes", Kind: EventHandler, Routes: []Route{{
		Category: "note", Type: "testNote",
		Decode: func(c Codec, b []byte) (any, error) {
			var n testNote
			return &n, c.Unmarshal(b, &n)
		},
		Invoke: func(_ context.Context, _ any, m any) error { notes <- m.(*testNote).Text; return nil },
	}}}
	j := newJournal()
	audit := Registration{Name: "audit", Kind: EventHandler, Routes: []Route{orderRoute("Client", func(_ context.Context, e *testEvent) error {
		j.leave2(e.Client, e.Seq)
		return nil
	})}}
	startEngine(t, c, fastOptions("p1"), noteH, audit)
	startEngine(t, c, fastOptions("p2"), noteH, audit)
	p := NewPublisher(c, PublisherOptions{})
	for i := 1; i <= 3; i++ {
		p.Publish(ctx, &testNote{Text: fmt.Sprint(i)})
		p.Publish(ctx, ev("a", i))
		p.Publish(ctx, ev("b", i))
	}
	p.Publish(ctx, ev("c", 1), AsBackfill())
	got := map[string]bool{}
	for range 3 {
		select {
		case n := <-notes:
			got[n] = true
		case <-time.After(20 * time.Second):
			t.Fatalf("notes so far %v", got)
		}
	}
	eventually(t, 20*time.Second, "audit saw every partition", func() bool {
		return j.count("a") == 3 && j.count("b") == 3 && j.count("c") == 1
	})
	if len(got) != 3 {
		t.Fatalf("notes %v", got)
	}
}
