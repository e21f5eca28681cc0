// Package shipping handles the protobuf order and return events: a ledger
// sequential by client, and a pm that ships an order once it is paid.
package shipping

import (
	"context"
	"fmt"
	"sync"

	"github.com/seqby/seqby/examples/protoorders/events"
	"github.com/seqby/seqby/examples/protoorders/ordersv1"
	"github.com/seqby/seqby/examples/protoorders/returnsv1"
)

// Ledger records each client's events in the order they were handled.
// It takes the protobuf types directly, by pointer (they must not be
// copied), named either through the alias or through ordersv1, and the
// return events of returnsv1 (declared in their own package) the same way.
//
//seqby:handler
//seqby:key=client_id
//seqby:name=protoorders.ledger
type Ledger struct {
	mu  sync.Mutex
	log map[string][]string
}

// OnPlaced records an order.
func (l *Ledger) OnPlaced(_ context.Context, e *events.OrderPlaced) error {
	l.add(e.ClientId, "placed "+e.OrderId)
	return nil
}

// OnPaid records a payment.
func (l *Ledger) OnPaid(_ context.Context, e *ordersv1.PaymentReceived) error {
	l.add(e.ClientId, fmt.Sprintf("paid %s %d", e.OrderId, e.AmountCents))
	return nil
}

// OnReturn records a return request.
func (l *Ledger) OnReturn(_ context.Context, e *returnsv1.ReturnRequested) error {
	l.add(e.ClientId, fmt.Sprintf("return %s: %s", e.OrderId, e.Reason))
	return nil
}

// OnRefund records a refund.
func (l *Ledger) OnRefund(_ context.Context, e *returnsv1.RefundIssued) error {
	l.add(e.ClientId, fmt.Sprintf("refund %s %d", e.OrderId, e.AmountCents))
	return nil
}

func (l *Ledger) add(client, what string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.log == nil {
		l.log = map[string][]string{}
	}
	l.log[client] = append(l.log[client], what)
}

// Log returns what the ledger saw of client, in order.
func (l *Ledger) Log(client string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.log[client]...)
}

// Fulfilment follows each order from payment to shipping, correlated by
// order id.
//
//seqby:pm
//seqby:name=protoorders.fulfilment
type Fulfilment struct {
	Paid, Shipped bool
}

// OnPaid notes the payment.
//
//seqby:correlate=order_id
func (f *Fulfilment) OnPaid(_ context.Context, e *ordersv1.PaymentReceived) error {
	f.Paid = true
	return nil
}

// OnShipped refuses to ship an unpaid order.
//
//seqby:correlate=order_id
func (f *Fulfilment) OnShipped(_ context.Context, e *events.OrderShipped) error {
	if !f.Paid {
		return fmt.Errorf("order %s shipped before it was paid", e.OrderId)
	}
	f.Shipped = true
	return nil
}
