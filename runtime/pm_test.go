package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seqby/seqby/runtime/internal/rdb"
)

// pmOrder and pmPayment are two categories partitioned by order_id, the
// correlation value of the test pm.
type pmOrder struct {
	OrderID string `json:"order_id"`
	Seq     int    `json:"seq"`
}

func (*pmOrder) StreamCategory() string          { return "pmorder" }
func (m *pmOrder) PartitionKey() (string, error) { return Key("pmorder", "OrderID", m.OrderID) }

type pmPayment struct {
	OrderID string `json:"order_id"`
	Seq     int    `json:"seq"`
	Poison  bool   `json:"poison,omitempty"`
}

func (*pmPayment) StreamCategory() string          { return "pmpayment" }
func (m *pmPayment) PartitionKey() (string, error) { return Key("pmpayment", "OrderID", m.OrderID) }

// flow is the test pm's state.
type flow struct {
	Orders   []int `json:"orders"`
	Payments []int `json:"payments"`
}

// pmRoute builds a pm route on a category for message type T (a pointer
// type with an OrderID), as seqgen would.
func pmRoute[T any, P interface {
	*T
	Partitioned
}](category, typ string, orderID func(P) string, fn func(ctx context.Context, st *flow, m P) error) Route {
	return Route{
		Category: category, Type: typ, PartitionField: "order_id", CorrelateField: "order_id",
		Decode: func(c Codec, p []byte) (any, error) {
			m := P(new(T))
			err := c.Unmarshal(p, m)
			return m, err
		},
		PartitionKey: func(m any) (string, error) { return m.(P).PartitionKey() },
		Correlate:    func(m any) (string, error) { return Key(category, "OrderID", orderID(m.(P))) },
		Invoke:       func(ctx context.Context, st any, m any) error { return fn(ctx, st.(*flow), m.(P)) },
	}
}

// flowPM is a sequential pm correlated by order_id across pmorder and
// pmpayment; hook runs inside every handle method before the state change.
func flowPM(name string, hook func(ctx context.Context, corr, event string, payment *pmPayment) error) Registration {
	return Registration{Name: name, Kind: ProcessManager, Sequential: true,
		NewState: func() any { return new(flow) },
		Routes: []Route{
			pmRoute("pmorder", "pmOrder", func(m *pmOrder) string { return m.OrderID },
				func(ctx context.Context, st *flow, m *pmOrder) error {
					if err := hook(ctx, m.OrderID, fmt.Sprintf("order/%d", m.Seq), nil); err != nil {
						return err
					}
					st.Orders = append(st.Orders, m.Seq)
					return nil
				}),
			pmRoute("pmpayment", "pmPayment", func(m *pmPayment) string { return m.OrderID },
				func(ctx context.Context, st *flow, m *pmPayment) error {
					if err := hook(ctx, m.OrderID, fmt.Sprintf("payment/%d", m.Seq), m); err != nil {
						return err
					}
					st.Payments = append(st.Payments, m.Seq)
					return nil
				}),
		}}
}

// loadFlow reads the saved state of the pm for a correlation value.
func loadFlow(t *testing.T, s StateStore, pm, corr string) (flow, int64) {
	t.Helper()
	data, v, err := s.Load(context.Background(), pm, corr)
	if err != nil {
		t.Fatal(err)
	}
	var f flow
	if data != nil {
		if err := json.Unmarshal(data, &f); err != nil {
			t.Fatal(err)
		}
	}
	return f, v
}

func seq(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i + 1
	}
	return out
}

// Two engines, interleaved order and payment events for several
// correlation values: no two events of one value are ever in the pm at
// once, different values run in parallel, and the saved state of each
// value holds every event once, in stream order per category.
func TestPMOneOwnerPerCorrelationValue(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	j := newJournal()
	// The first events of o-1 and o-2 wait for each other: if values were
	// serialized with each other, this would never be met.
	var met sync.WaitGroup
	met.Add(2)
	var first1, first2 sync.Once
	var badCorr atomic.Value
	pm := flowPM("flow", func(ctx context.Context, corr, event string, _ *pmPayment) error {
		if got, _ := Correlation(ctx); got != corr {
			badCorr.Store(fmt.Sprintf("Correlation(ctx) = %q in a handler for %q", got, corr))
		}
		if li, ok := LeaseFromContext(ctx); !ok || li.Key != corr || li.Handler != "flow" {
			badCorr.Store(fmt.Sprintf("LeaseFromContext = %+v, %v for %q", li, ok, corr))
		}
		j.enter(corr, event)
		defer j.leave(corr, event, 0, true)
		switch corr {
		case "o-1":
			first1.Do(func() { met.Done(); waitGroupWithin(t, &met, 20*time.Second) })
		case "o-2":
			first2.Do(func() { met.Done(); waitGroupWithin(t, &met, 20*time.Second) })
		}
		time.Sleep(time.Millisecond) // widen the window an overlap would need
		return nil
	})
	startEngine(t, c, fastOptions("p1"), pm)
	startEngine(t, c, fastOptions("p2"), pm)
	p := NewPublisher(c)
	values := []string{"o-1", "o-2", "o-3", "o-4"}
	const n = 15
	for i := 1; i <= n; i++ {
		for _, v := range values {
			if err := p.Publish(ctx, &pmOrder{OrderID: v, Seq: i}); err != nil {
				t.Fatal(err)
			}
			if err := p.Publish(ctx, &pmPayment{OrderID: v, Seq: i}); err != nil {
				t.Fatal(err)
			}
		}
	}
	store := NewRedisStateStore(c)
	for _, v := range values {
		eventually(t, 30*time.Second, "state of "+v+" complete", func() bool {
			f, _ := loadFlow(t, store, "flow", v)
			return len(f.Orders) >= n && len(f.Payments) >= n
		})
		f, version := loadFlow(t, store, "flow", v)
		if !slices.Equal(f.Orders, seq(n)) || !slices.Equal(f.Payments, seq(n)) {
			t.Errorf("%s: saved state %+v, want orders and payments 1..%d once each", v, f, n)
		}
		if version != 2*n {
			t.Errorf("%s: state version %d, want %d (one save per event)", v, version, 2*n)
		}
	}
	if len(j.overlap) > 0 {
		t.Fatalf("events of one correlation value overlapped in the pm: %v", j.overlap)
	}
	if s, ok := badCorr.Load().(string); ok {
		t.Fatal(s)
	}
}

// waitGroupWithin waits for wg or fails the test after d.
func waitGroupWithin(t *testing.T, wg *sync.WaitGroup, d time.Duration) {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(d):
		t.Errorf("correlation values did not run in parallel within %v", d)
	}
}

// A poison event halts its correlation value only: later events of that
// value are not applied (in any category), other values complete.
func TestPMHaltOnPoisonScopedToCorrelationValue(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	pm := flowPM("flow", func(_ context.Context, _, _ string, pay *pmPayment) error {
		if pay != nil && pay.Poison {
			return errPoison
		}
		return nil
	})
	halts := make(chan Halt, 4)
	opts := fastOptions("p1")
	opts.Retry.MaxRetries = 1
	opts.OnHalt = func(h Halt) { halts <- h }
	r := startEngine(t, c, opts, pm)
	p := NewPublisher(c)
	publish := func(v string, from, to int) {
		for i := from; i <= to; i++ {
			if err := p.Publish(ctx, &pmOrder{OrderID: v, Seq: i}); err != nil {
				t.Fatal(err)
			}
			if err := p.Publish(ctx, &pmPayment{OrderID: v, Seq: i, Poison: v == "o-1" && i == 2}); err != nil {
				t.Fatal(err)
			}
		}
	}
	publish("o-1", 1, 2)
	var h Halt
	select {
	case h = <-halts:
	case <-ctx.Done():
		t.Fatal("no halt reported")
	}
	if h.Key != "o-1" || h.Category != "pmpayment" || h.Stream != "pmpayment:{o-1}" || !errors.Is(h.Err, errPoison) {
		t.Fatalf("halt %+v, want o-1 on pmpayment:o-1 with the poison error", h)
	}
	const n = 4
	publish("o-1", 3, n)
	publish("o-2", 1, n)
	store := NewRedisStateStore(c)
	eventually(t, 20*time.Second, "o-2 complete", func() bool {
		f, _ := loadFlow(t, store, "flow", "o-2")
		return len(f.Orders) == n && len(f.Payments) == n
	})
	// Nothing of o-1 after its poison is applied, in either category.
	// (Whether order 2 came before payment 2 depends on their entry ids:
	// a pm has no cross-category order within one millisecond.)
	if f, _ := loadFlow(t, store, "flow", "o-1"); !slices.Equal(f.Payments, []int{1}) ||
		!(slices.Equal(f.Orders, []int{1}) || slices.Equal(f.Orders, []int{1, 2})) {
		t.Fatalf("o-1 state %+v, want payments [1] and orders [1] or [1 2]: the value halts at its poison", f)
	}
	if hs := r.Status().Halted(); len(hs) != 1 || hs[0].Key != "o-1" || hs[0].Category != "pmorder,pmpayment" {
		t.Fatalf("halted partitions %+v, want o-1 only", hs)
	}
}

// An owner that loses its lease while inside a handle method (its lease
// deleted here, as after an expiry during a stall) never saves: the next
// owner reclaims and applies the event, and the state holds it once.
func TestPMStaleOwnerDoesNotSave(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	stalled := make(chan struct{})
	resume := make(chan struct{})
	var stallOnce sync.Once
	var calls sync.Map // owner -> handle calls for order/1
	pm := func(owner string) Registration {
		return flowPM("flow", func(_ context.Context, corr, event string, _ *pmPayment) error {
			if event != "order/1" {
				return nil
			}
			n, _ := calls.LoadOrStore(owner, new(atomic.Int32))
			n.(*atomic.Int32).Add(1)
			if owner == "p1" {
				// The stall ignores ctx, as a paused process would.
				stallOnce.Do(func() { close(stalled); <-resume })
			}
			return nil
		})
	}
	a := startEngine(t, c, fastOptions("p1"), pm("p1"))
	p := NewPublisher(c)
	if err := p.Publish(ctx, &pmOrder{OrderID: "o-1", Seq: 1}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-stalled:
	case <-ctx.Done():
		t.Fatal("p1 never handled o-1")
	}
	startEngine(t, c, fastOptions("p2"), pm("p2"))
	if err := c.Del(ctx, rdb.PMLeaseKey("flow", "o-1")).Err(); err != nil {
		t.Fatal(err)
	}
	store := NewRedisStateStore(c)
	eventually(t, 20*time.Second, "p2 applies the stalled event", func() bool {
		f, _ := loadFlow(t, store, "flow", "o-1")
		return slices.Equal(f.Orders, []int{1})
	})
	close(resume)
	eventually(t, 20*time.Second, "p1 abandons o-1", func() bool { return len(a.Status().Partitions) == 0 })
	for i := 2; i <= 3; i++ {
		if err := p.Publish(ctx, &pmOrder{OrderID: "o-1", Seq: i}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 20*time.Second, "later events applied", func() bool {
		f, _ := loadFlow(t, store, "flow", "o-1")
		return len(f.Orders) >= 3
	})
	if f, v := loadFlow(t, store, "flow", "o-1"); !slices.Equal(f.Orders, []int{1, 2, 3}) || v != 3 {
		t.Fatalf("state %+v version %d, want orders [1 2 3] at version 3: the stale owner must not save", f, v)
	}
}

// The inline broker runs a pm through a state store too: state persists
// per correlation value, and a failed call saves nothing.
func TestInlinePMState(t *testing.T) {
	ctx := ctxT(t)
	b := NewInlineBroker()
	pm := flowPM("flow", func(ctx context.Context, corr, _ string, pay *pmPayment) error {
		if got, _ := Correlation(ctx); got != corr {
			return fmt.Errorf("Correlation(ctx) = %q, want %q", got, corr)
		}
		if pay != nil && pay.Poison {
			return errPoison
		}
		return nil
	})
	if err := b.Register(pm); err != nil {
		t.Fatal(err)
	}
	for _, m := range []Message{&pmOrder{OrderID: "o-1", Seq: 1}, &pmPayment{OrderID: "o-1", Seq: 1},
		&pmOrder{OrderID: "o-2", Seq: 1}, &pmOrder{OrderID: "o-1", Seq: 2}} {
		if err := b.Publish(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Publish(ctx, &pmPayment{OrderID: "o-1", Seq: 2, Poison: true}); !errors.Is(err, errPoison) {
		t.Fatalf("poison publish: %v", err)
	}
	if f, v := loadFlow(t, b.States(), "flow", "o-1"); !slices.Equal(f.Orders, []int{1, 2}) || !slices.Equal(f.Payments, []int{1}) || v != 3 {
		t.Fatalf("o-1 state %+v version %d", f, v)
	}
	if f, _ := loadFlow(t, b.States(), "flow", "o-2"); !slices.Equal(f.Orders, []int{1}) || f.Payments != nil {
		t.Fatalf("o-2 state %+v", f)
	}
}

// A pm that is not sequential runs on plain groups: two engines may handle
// events of one instance at once, and the optimistic state check makes
// every event land in the state exactly once anyway.
func TestPMNotSequentialOptimisticState(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	pm := nonSequential(flowPM("flow", func(ctx context.Context, corr, _ string, _ *pmPayment) error {
		if got, _ := Correlation(ctx); got != corr {
			return fmt.Errorf("Correlation(ctx) = %q, want %q", got, corr)
		}
		return nil
	}))
	startEngine(t, c, fastOptions("p1"), pm)
	startEngine(t, c, fastOptions("p2"), pm)
	p := NewPublisher(c)
	const n = 20
	for i := 1; i <= n; i++ {
		if err := p.Publish(ctx, &pmOrder{OrderID: "o-1", Seq: i}); err != nil {
			t.Fatal(err)
		}
		if err := p.Publish(ctx, &pmPayment{OrderID: "o-1", Seq: i}); err != nil {
			t.Fatal(err)
		}
	}
	store := NewRedisStateStore(c)
	eventually(t, 30*time.Second, "every event in the state", func() bool {
		f, _ := loadFlow(t, store, "flow", "o-1")
		return len(f.Orders)+len(f.Payments) >= 2*n
	})
	f, v := loadFlow(t, store, "flow", "o-1")
	slices.Sort(f.Orders)
	slices.Sort(f.Payments)
	if !slices.Equal(f.Orders, seq(n)) || !slices.Equal(f.Payments, seq(n)) || v != 2*n {
		t.Fatalf("state %+v at version %d, want each event once (version %d)", f, v, 2*n)
	}
}
