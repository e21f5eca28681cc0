package runtime

import (
	"context"
	"errors"
	"slices"
	"testing"
)

// plainBroker advertises no partitioning, like a broker without it.
type plainBroker struct{ *Registry }

func (plainBroker) Name() string               { return "plain" }
func (plainBroker) Capabilities() Capabilities { return ConsumerGroups }
func (b plainBroker) Register(regs ...Registration) error {
	return b.Registry.Add(regs...)
}

func noop(context.Context, *testEvent) error { return nil }

func TestRegistrationFailures(t *testing.T) {
	other := keyedHandler("other", noop)
	other.Routes[0].PartitionField = "tenant"
	unkeyed := Registration{Name: "audit", Kind: EventHandler, Routes: []Route{orderRoute("", noop)}}
	noKeyRoute := keyedHandler("nokey", noop)
	noKeyRoute.Routes[0].PartitionField, noKeyRoute.Routes[0].PartitionKey = "", nil
	ackBatch := func(r Registration, n int) Registration { r.AckBatch = n; return r }

	tests := []struct {
		name   string
		broker func() Broker
		regs   [][]Registration // Register calls in order
		want   error            // error of the last call; nil: accepted
	}{
		{"keyed on redis", func() Broker { return mustEngine(t) }, [][]Registration{{keyedHandler("h", noop)}}, nil},
		{"keyed on inline", func() Broker { return NewInlineBroker(nil) }, [][]Registration{{keyedHandler("h", noop)}}, nil},
		{"keyed without capability", func() Broker { return plainBroker{NewRegistry("plain", ConsumerGroups)} },
			[][]Registration{{keyedHandler("h", noop)}}, ErrCapability},
		{"unkeyed without capability", func() Broker { return plainBroker{NewRegistry("plain", ConsumerGroups)} },
			[][]Registration{{unkeyed}}, nil},
		{"conflicting keys in one call", func() Broker { return mustEngine(t) },
			[][]Registration{{keyedHandler("h", noop), other}}, ErrKeyConflict},
		{"conflicting keys across calls", func() Broker { return mustEngine(t) },
			[][]Registration{{keyedHandler("h", noop)}, {other}}, ErrKeyConflict},
		{"same key twice", func() Broker { return mustEngine(t) },
			[][]Registration{{keyedHandler("h", noop)}, {keyedHandler("h2", noop)}}, nil},
		{"unkeyed on partitioned category", func() Broker { return mustEngine(t) },
			[][]Registration{{keyedHandler("h", noop)}, {unkeyed}}, nil},
		{"keyed route without key field", func() Broker { return mustEngine(t) },
			[][]Registration{{noKeyRoute}}, ErrRegistration},
		{"'@' in a keyed handler's name", func() Broker { return mustEngine(t) },
			[][]Registration{{keyedHandler("h@1", noop)}}, ErrRegistration},
		{"'@' in a pm's name", func() Broker { return NewInlineBroker() },
			[][]Registration{{flowPM("pm@0", noHook)}}, ErrRegistration},
		{"duplicate name", func() Broker { return mustEngine(t) },
			[][]Registration{{keyedHandler("h", noop)}, {keyedHandler("h", noop)}}, ErrRegistration},
		{"pm without state or correlate", func() Broker { return mustEngine(t) },
			[][]Registration{{{Name: "pm", Kind: ProcessManager, Routes: []Route{orderRoute("", noop)}}}}, ErrRegistration},
		{"non-sequential pm on redis engine", func() Broker { return mustEngine(t) },
			[][]Registration{{nonSequential(flowPM("pm", noHook))}}, nil},
		{"sequential pm on redis engine", func() Broker { return mustEngine(t) },
			[][]Registration{{flowPM("pm", noHook)}}, nil},
		{"non-sequential pm on inline", func() Broker { return NewInlineBroker() },
			[][]Registration{{nonSequential(flowPM("pm", noHook))}}, nil},
		{"pm without NewState", func() Broker { return mustEngine(t) },
			[][]Registration{{withoutState(flowPM("pm", noHook))}}, ErrRegistration},
		{"pm route without correlate", func() Broker { return NewInlineBroker() },
			[][]Registration{{withoutCorrelate(flowPM("pm", noHook))}}, ErrRegistration},
		{"sequential pm partitioning by another field than it correlates", func() Broker { return mustEngine(t) },
			[][]Registration{{partitionedBy(flowPM("pm", noHook), "customer_id")}}, ErrKeyConflict},
		{"keyed handler disagreeing with a sequential pm", func() Broker { return mustEngine(t) },
			[][]Registration{{flowPM("pm", noHook)}, {paymentsBy("customer_id")}}, ErrKeyConflict},
		{"sequential pm disagreeing with a keyed handler", func() Broker { return NewInlineBroker() },
			[][]Registration{{paymentsBy("customer_id")}, {flowPM("pm", noHook)}}, ErrKeyConflict},
		{"keyed handler agreeing with a sequential pm", func() Broker { return mustEngine(t) },
			[][]Registration{{flowPM("pm", noHook)}, {paymentsBy("order_id")}}, nil},
		{"batched keyed handler", func() Broker { return mustEngine(t) },
			[][]Registration{{ackBatch(keyedHandler("h", noop), 1000)}}, nil},
		{"AckBatch 1 is the default promise", func() Broker { return mustEngine(t) },
			[][]Registration{{ackBatch(keyedHandler("h", noop), 1)}}, nil},
		{"negative AckBatch", func() Broker { return mustEngine(t) },
			[][]Registration{{ackBatch(keyedHandler("h", noop), -1)}}, ErrRegistration},
		{"AckBatch above 1000", func() Broker { return mustEngine(t) },
			[][]Registration{{ackBatch(keyedHandler("h", noop), 1001)}}, ErrRegistration},
		{"batched unkeyed handler", func() Broker { return mustEngine(t) },
			[][]Registration{{ackBatch(unkeyed, 8)}}, ErrRegistration},
		{"batched pm", func() Broker { return mustEngine(t) },
			[][]Registration{{ackBatch(flowPM("pm", noHook), 8)}}, ErrRegistration},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := tt.broker()
			var err error
			for _, regs := range tt.regs {
				err = b.Register(regs...)
			}
			if tt.want == nil {
				if err != nil {
					t.Fatalf("rejected: %v", err)
				}
				return
			}
			if !errors.Is(err, tt.want) || !errors.Is(err, ErrRegistration) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
		})
	}
}

func TestConflictRejectedRegistrationAddsNothing(t *testing.T) {
	e := mustEngine(t)
	other := keyedHandler("other", noop)
	other.Routes[0].PartitionField = "tenant"
	if err := e.Register(keyedHandler("ok", noop), other); !errors.Is(err, ErrKeyConflict) {
		t.Fatal(err)
	}
	if n := len(e.Registrations()); n != 0 {
		t.Fatalf("%d registrations kept after a failed Register", n)
	}
}

func mustEngine(t *testing.T) *Engine {
	e, err := NewEngine(nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func noHook(context.Context, string, string, *pmPayment) error { return nil }

func nonSequential(r Registration) Registration { r.Sequential = false; return r }

func withoutState(r Registration) Registration { r.NewState = nil; return r }

func withoutCorrelate(r Registration) Registration {
	r.Routes = slices.Clone(r.Routes)
	r.Routes[1].Correlate = nil
	return r
}

func partitionedBy(r Registration, field string) Registration {
	r.Routes = slices.Clone(r.Routes)
	r.Routes[1].PartitionField = field
	return r
}

// paymentsBy is a keyed handler on pmpayment partitioned by field.
func paymentsBy(field string) Registration {
	rt := flowPM("x", noHook).Routes[1]
	rt.Correlate, rt.CorrelateField, rt.PartitionField = nil, "", field
	return Registration{Name: "payments", Kind: EventHandler, Key: field, Sequential: true, Routes: []Route{rt}}
}
