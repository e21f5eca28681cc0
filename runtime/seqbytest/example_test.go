package seqbytest_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/seqby/seqby/examples/protoorders/events"
	"github.com/seqby/seqby/examples/protoorders/ordersv1"
	"github.com/seqby/seqby/examples/protoorders/shipping"
	"github.com/seqby/seqby/examples/quickstart"
	"github.com/seqby/seqby/runtime"
	"github.com/seqby/seqby/runtime/seqbytest"
)

// A unit test of a keyed handler, Ledger, registered with the
// SeqbyRegistration seqgen wrote for it: each message runs inside Publish,
// encoded and decoded as on the wire, under a lease, as on the engine.
func ExampleNewBroker() {
	t := &testing.T{} // provided by go test: this is the body of func TestLedger(t *testing.T)
	ctx := context.Background()

	accounts := &quickstart.Memory{}
	ledger := &quickstart.Ledger{Accounts: accounts}
	b := seqbytest.NewBroker(t, ledger.SeqbyRegistration())
	for _, e := range []runtime.Message{
		quickstart.Deposited{AccountID: "acc-1", Amount: 100},
		quickstart.Withdrawn{AccountID: "acc-1", Amount: 30},
	} {
		if err := b.Publish(ctx, e); err != nil {
			t.Fatal(err) // the handler's error, or the message's key's
		}
	}
	fmt.Println(accounts.Changes("acc-1"), accounts.Balance("acc-1"), b.Halts())
	// Output: [100 -30] 70 []
}

// Handlers of protobuf messages are tested with the protobuf codec their
// engine runs with: here the protoorders example's, whose events are
// protobuf types declared seqby events by marked aliases.
func ExampleNewBrokerCodec() {
	t := &testing.T{} // provided by go test: this is the body of func TestShipping(t *testing.T)
	ctx := context.Background()

	ledger := &shipping.Ledger{}
	b := seqbytest.NewBrokerCodec(t, events.Proto, ledger.SeqbyRegistration())
	for _, e := range []runtime.Message{
		events.SeqbyOrderPlaced(&ordersv1.OrderPlaced{ClientId: "c-1", OrderId: "o-1"}),
		events.SeqbyPaymentReceived(&ordersv1.PaymentReceived{ClientId: "c-1", OrderId: "o-1", AmountCents: 2500}),
	} {
		if err := b.Publish(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	fmt.Println(ledger.Log("c-1"))
	// Output: [placed o-1 paid o-1 2500]
}

// An integration test runs the handler on a real engine, on an embedded
// Redis started for the test (or the server of $SEQBYTEST_REDIS_URL),
// until the test ends.
func ExampleStartEngine() {
	t := &testing.T{} // provided by go test: this is the body of func TestLedgerOnEngine(t *testing.T)

	accounts := &quickstart.Memory{}
	ledger := &quickstart.Ledger{Accounts: accounts}
	e := seqbytest.StartEngine(t, []runtime.Registration{ledger.SeqbyRegistration()})
	e.Publish(
		quickstart.Deposited{AccountID: "acc-1", Amount: 100},
		quickstart.Deposited{AccountID: "acc-2", Amount: 5},
		quickstart.Withdrawn{AccountID: "acc-1", Amount: 30},
	)
	e.WaitDrained() // every handler has handled every message, or the test fails
	fmt.Println("acc-1", accounts.Changes("acc-1"))
	fmt.Println("acc-2", accounts.Changes("acc-2"))
	e.Stop() // a test's cleanup does this; the zero T above runs no cleanups
	// Output:
	// acc-1 [100 -30]
	// acc-2 [5]
}
