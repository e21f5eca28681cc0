package billing

import (
	"context"

	"github.com/seqby/seqby/examples/orders/events"
)

// Fulfilment is a process manager per order: it ships an order once it is
// both placed and paid. Sequential: one engine instance owns an order id
// and applies its order and payment events one at a time.
//
//seqby:pm
//seqby:sequential
type Fulfilment struct {
	Placed bool  `json:"placed"`
	Paid   bool  `json:"paid"`
	Amount int64 `json:"amount"`
}

// OnPlaced notes the order.
//
//seqby:correlate=order_id
func (f *Fulfilment) OnPlaced(ctx context.Context, e events.OrderPlaced) error {
	f.Placed, f.Amount = true, e.Amount
	return nil
}

// OnPaid notes the payment.
//
//seqby:correlate=order_id
func (f *Fulfilment) OnPaid(ctx context.Context, e events.PaymentReceived) error {
	f.Paid = true
	return nil
}

// Ready reports whether the order can ship.
func (f *Fulfilment) Ready() bool { return f.Placed && f.Paid }
