package runtime

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// The embedded demo runs on miniredis: a smoke test that the engine works
// there too. The guarantees themselves are tested on real Redis only.
func TestEngineOnMiniredis(t *testing.T) {
	m := miniredis.RunT(t)
	c := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { c.Close() })
	ctx := ctxT(t)
	j := newJournal()
	h := keyedHandler("orders", func(_ context.Context, e *testEvent) error {
		j.leave2(e.Client, e.Seq)
		return nil
	})
	opts := fastOptions("p1")
	if testing.Verbose() {
		opts.Logger = nil
	}
	r := startEngine(t, c, opts, h)
	p := NewPublisher(c, PublisherOptions{})
	for i := 1; i <= 5; i++ {
		for _, k := range []string{"a", "b"} {
			if err := p.Publish(ctx, ev(k, i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	eventually(t, 20*time.Second, "all applied", func() bool { return j.count("a") == 5 && j.count("b") == 5 })
	for _, k := range []string{"a", "b"} {
		if got := fmt.Sprint(j.seqs(k)); got != "[1 2 3 4 5]" {
			t.Fatalf("%s applied %s", k, got)
		}
	}
	r.stop()
}

// The example's pm runs on the embedded demo too: a smoke test of the pm
// scripts (oldest-first read, state save) on miniredis.
func TestPMOnMiniredis(t *testing.T) {
	m := miniredis.RunT(t)
	c := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { c.Close() })
	ctx := ctxT(t)
	startEngine(t, c, fastOptions("p1"), flowPM("flow", noHook))
	p := NewPublisher(c)
	for i := 1; i <= 3; i++ {
		for _, msg := range []Message{&pmOrder{OrderID: "o-1", Seq: i}, &pmPayment{OrderID: "o-1", Seq: i}} {
			if err := p.Publish(ctx, msg); err != nil {
				t.Fatal(err)
			}
		}
	}
	store := NewRedisStateStore(c)
	eventually(t, 20*time.Second, "state complete", func() bool {
		f, _ := loadFlow(t, store, "flow", "o-1")
		return len(f.Orders) == 3 && len(f.Payments) == 3
	})
	if f, v := loadFlow(t, store, "flow", "o-1"); fmt.Sprint(f.Orders, f.Payments, v) != "[1 2 3] [1 2 3] 6" {
		t.Fatalf("state %+v version %d", f, v)
	}
}
