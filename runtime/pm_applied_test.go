package runtime

import (
	"context"
	"slices"
	"testing"

	"github.com/seqby/seqby/runtime/internal/rdb"
)

// TestPMEntryAppliedOnceAcrossLostAck: an owner that saved a pm's state and
// died before its ack leaves the entry pending; the next owner gets it
// again. The built-in stores record the entry with the state, so the
// second delivery is acked without being applied twice: the engine hands
// them to its executor with their applied marks (the executor's own test
// covers the rule with a store of its own).
func TestPMEntryAppliedOnceAcrossLostAck(t *testing.T) {
	c := newRedis(t)
	stores := []struct {
		name  string
		store StateStore
	}{
		{"redis", NewRedisStateStore(c)},
		{"memory", NewMemoryStateStore()},
	}
	for _, tt := range stores {
		t.Run(tt.name, func(t *testing.T) {
			opts := fastOptions("applied-" + tt.name)
			opts.StateStore = tt.store
			e, err := NewEngine(c, opts)
			if err != nil {
				t.Fatal(err)
			}
			calls := 0
			reg := flowPM("flow-"+tt.name, func(context.Context, string, string, *pmPayment) error { calls++; return nil })
			if err := e.Register(reg); err != nil {
				t.Fatal(err)
			}
			rt := routeOf(reg.Routes[0], e.o.Codec)
			ctx := context.Background()
			apply := func(id string, seq int) {
				t.Helper()
				en := rdb.Entry{Stream: "pmorder:{o-1}", ID: id}
				if _, err := e.exec.ApplyPM(ctx, reg.Name, rt, "o-1", &pmOrder{OrderID: "o-1", Seq: seq}, &en); err != nil {
					t.Fatal(err)
				}
			}
			apply("5-0", 1)
			apply("5-0", 1) // redelivered: its ack was lost
			apply("12-3", 2)
			apply("12-3", 2)
			apply("5-0", 1) // older than what the state includes
			f, version := loadFlow(t, tt.store, reg.Name, "o-1")
			if !slices.Equal(f.Orders, []int{1, 2}) || version != 2 || calls != 2 {
				t.Errorf("orders %v at version %d after %d calls; want [1 2] at version 2 after 2 calls", f.Orders, version, calls)
			}
		})
	}
}
