package runtime

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/seqby/seqby/runtime/internal/telemetry"
)

// pmOrderNote is a second message type of the pmorder category, which
// the order-only pm below has no handle method for.
type pmOrderNote struct {
	OrderID string `json:"order_id"`
	Text    string `json:"text"`
}

func (*pmOrderNote) StreamCategory() string          { return "pmorder" }
func (m *pmOrderNote) PartitionKey() (string, error) { return Key("pmorder", "OrderID", m.OrderID) }

// A handler's "handled" count is the events routed to it, the ones its
// handle methods ran on; the other events of its categories, which it
// reads and acks without a call, count as "skipped". Before issue #26
// they all counted as handled: a pm with 25 events routed to it on a
// busy category showed 5,025.
func TestHandledCountsOnlyRoutedEvents(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	mr, mp := newMetricsReader(t)
	// The pm handles orders only; "notes" handles the notes, so their
	// type is known and the pm skips them rather than halting on them.
	pm := Registration{Name: "orders-only", Kind: ProcessManager, Sequential: true,
		NewState: func() any { return new(flow) },
		Routes: []Route{pmRoute("pmorder", "pmOrder", func(m *pmOrder) string { return m.OrderID },
			func(_ context.Context, st *flow, m *pmOrder) error { st.Orders = append(st.Orders, m.Seq); return nil })}}
	notes := Registration{Name: "notes", Kind: EventHandler, Key: "OrderID", Sequential: true,
		Routes: []Route{{Category: "pmorder", Type: "pmOrderNote", PartitionField: "order_id",
			PartitionKey: func(m any) (string, error) { return m.(*pmOrderNote).PartitionKey() },
			Decode: func(c Codec, p []byte) (any, error) {
				var m pmOrderNote
				err := c.Unmarshal(p, &m)
				return &m, err
			},
			Invoke: func(context.Context, any, any) error { return nil }}}}
	opts := fastOptions("skips")
	opts.MeterProvider = mp
	startEngine(t, c, opts, pm, notes)
	const orders, noteCount = 3, 7
	p := NewPublisher(c)
	for i := 1; i <= noteCount; i++ {
		msgs := []Message{&pmOrderNote{OrderID: "o-1", Text: fmt.Sprint(i)}}
		if i <= orders {
			msgs = append(msgs, &pmOrder{OrderID: "o-1", Seq: i})
		}
		for _, m := range msgs {
			if err := p.Publish(ctx, m); err != nil {
				t.Fatal(err)
			}
		}
	}
	count := func(handler, outcome string) float64 {
		v, _ := mr.Value("seqby.events", telemetry.AttrHandler.String(handler), telemetry.AttrOutcome.String(outcome))
		return v
	}
	eventually(t, 20*time.Second, "both handlers through every event", func() bool {
		return count("orders-only", telemetry.OutcomeHandled)+count("orders-only", telemetry.OutcomeSkipped) == orders+noteCount &&
			count("notes", telemetry.OutcomeHandled)+count("notes", telemetry.OutcomeSkipped) == orders+noteCount
	})
	tests := []struct {
		handler, outcome string
		want             float64
	}{
		{"orders-only", telemetry.OutcomeHandled, orders},
		{"orders-only", telemetry.OutcomeSkipped, noteCount},
		{"notes", telemetry.OutcomeHandled, noteCount},
		{"notes", telemetry.OutcomeSkipped, orders},
	}
	for _, tt := range tests {
		if got := count(tt.handler, tt.outcome); got != tt.want {
			t.Errorf("%s %s: %v, want %v", tt.handler, tt.outcome, got, tt.want)
		}
	}
	if f, _ := loadFlow(t, NewRedisStateStore(c), "orders-only", "o-1"); fmt.Sprint(f.Orders) != "[1 2 3]" {
		t.Errorf("the pm applied orders %v, want [1 2 3]", f.Orders)
	}
}
