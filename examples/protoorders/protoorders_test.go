package protoorders_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/seqby/seqby/examples/protoorders/events"
	"github.com/seqby/seqby/examples/protoorders/ordersv1"
	"github.com/seqby/seqby/examples/protoorders/returnsv1"
	"github.com/seqby/seqby/examples/protoorders/shipping"
	"github.com/seqby/seqby/generator"
	"github.com/seqby/seqby/internal/redistest"
	"github.com/seqby/seqby/runtime"
	"github.com/seqby/seqby/runtime/seqbytest"
)

// The same-package form makes the protobuf messages themselves messages:
// seqgen wrote their methods beside returns.pb.go.
var (
	_ runtime.Message = (*returnsv1.ReturnRequested)(nil)
	_ runtime.Message = (*returnsv1.RefundIssued)(nil)
)

// TestEndToEnd publishes protobuf events of three clients, interleaved,
// through a real engine on a private redis-server: the order events of
// ordersv1 through events' wrappers (aliases in another package), the
// return events of returnsv1 as they are (&returnsv1.ReturnRequested{...},
// marked in their own package). Each reaches its handlers decoded as the
// protobuf type, the ledger sees each client's events in publish order,
// the pm ships every paid order, and the entries in Redis are protobuf
// payloads under the protobuf type names.
func TestEndToEnd(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv, err := redistest.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	ledger := &shipping.Ledger{}
	eng := seqbytest.StartEngine(t, []runtime.Registration{ledger.SeqbyRegistration(), new(shipping.Fulfilment).SeqbyRegistration()},
		seqbytest.Options{RedisURL: "redis://" + srv.Addr, Engine: runtime.Options{Codec: events.Proto}})

	clients := []string{"c1", "c2", "c3"}
	want := map[string][]string{}
	var msgs []runtime.Message
	for i := range 4 {
		for _, c := range clients {
			order := fmt.Sprintf("%s-o%d", c, i)
			msgs = append(msgs,
				events.SeqbyOrderPlaced(&ordersv1.OrderPlaced{ClientId: c, OrderId: order, AmountCents: int64(100 * i)}),
				events.SeqbyPaymentReceived(&ordersv1.PaymentReceived{ClientId: c, OrderId: order, AmountCents: int64(100 * i)}),
				events.SeqbyOrderShipped(&ordersv1.OrderShipped{ClientId: c, OrderId: order}))
			want[c] = append(want[c], "placed "+order, fmt.Sprintf("paid %s %d", order, 100*i))
			if i%2 == 1 {
				msgs = append(msgs,
					&returnsv1.ReturnRequested{ClientId: c, OrderId: order, Reason: "damaged"},
					&returnsv1.RefundIssued{ClientId: c, OrderId: order, AmountCents: int64(100 * i)})
				want[c] = append(want[c], "return "+order+": damaged", fmt.Sprintf("refund %s %d", order, 100*i))
			}
		}
	}
	eng.Publish(msgs...)
	eng.WaitDrained()
	for _, c := range clients {
		if got := ledger.Log(c); !slices.Equal(got, want[c]) {
			t.Errorf("ledger of %s:\n got %q\nwant %q", c, got, want[c])
		}
	}

	// What the publisher wrote: a protobuf payload under the protobuf
	// type's name, in client c2's partition (the engine has trimmed the
	// entries it handled, so look at the record Publish encodes).
	r, err := runtime.NewRecord(ctx, events.SeqbyOrderPlaced(&ordersv1.OrderPlaced{ClientId: "c2", OrderId: "c2-o0"}), events.Proto)
	if err != nil {
		t.Fatal(err)
	}
	var placed ordersv1.OrderPlaced
	if err := proto.Unmarshal(r.Payload, &placed); err != nil || placed.OrderId != "c2-o0" || r.Type != "OrderPlaced" || r.Key != "c2" || r.Category != "proto-orders" {
		t.Fatalf("record %+v: payload %v (%v)", r, &placed, err)
	}
	r, err = runtime.NewRecord(ctx, &returnsv1.ReturnRequested{ClientId: "c2", OrderId: "c2-o1", Reason: "late"}, events.Proto)
	if err != nil {
		t.Fatal(err)
	}
	var ret returnsv1.ReturnRequested
	if err := proto.Unmarshal(r.Payload, &ret); err != nil || ret.Reason != "late" || r.Type != "ReturnRequested" || r.Key != "c2" || r.Category != "proto-orders" {
		t.Fatalf("record %+v: payload %v (%v)", r, &ret, err)
	}
}

// TestBadKeyFailsBeforeWriting: the alias's key is checked as a marked
// type's would be, before anything is written, and so is a same-package
// message's.
func TestBadKeyFailsBeforeWriting(t *testing.T) {
	b := runtime.NewInlineBroker()
	err := b.Publish(context.Background(), events.SeqbyOrderPlaced(&ordersv1.OrderPlaced{ClientId: "a:b"}))
	if !errors.Is(err, runtime.ErrKeyColon) {
		t.Fatalf("publish with client a:b: %v, want ErrKeyColon", err)
	}
	if err := b.Publish(context.Background(), events.SeqbyOrderPlaced(nil)); err == nil {
		t.Fatal("publishing a nil message succeeded")
	}
	// The same-package form checks its key the same way.
	if err := b.Publish(context.Background(), &returnsv1.ReturnRequested{ClientId: "a:b"}); !errors.Is(err, runtime.ErrKeyColon) {
		t.Fatalf("publish a return with client a:b: %v, want ErrKeyColon", err)
	}
}

// TestGeneratedCodeIsCurrent fails when the committed seqby_gen.go files
// of this example differ from what seqgen writes now.
func TestGeneratedCodeIsCurrent(t *testing.T) {
	res, err := generator.Generate(generator.Config{Dir: ".", Patterns: []string{"./..."}})
	if err != nil {
		t.Fatal(err)
	}
	if d := res.Diff("."); len(d) > 0 {
		t.Fatalf("generated code is stale; run go generate ./examples/protoorders/...\n%s", d)
	}
}
