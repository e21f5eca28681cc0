// Package billing holds the example's handlers: a ledger that must see each
// client's cart events in publish order, and a fulfilment process manager
// per order.
package billing

import (
	"context"
	"fmt"
	"sync"

	"github.com/seqby/seqby/examples/orders/events"
)

// Ledger records, per client, the cart events it applied. Sequential by
// client_id: one client's events are applied one at a time, in publish
// order, whichever engine instance owns the client.
//
//seqby:handler
//seqby:key=client_id
type Ledger struct {
	mu      sync.Mutex
	applied map[string][]string
}

// NewLedger returns an empty ledger.
func NewLedger() *Ledger { return &Ledger{applied: map[string][]string{}} }

// OnItemAdded records an added item.
func (l *Ledger) OnItemAdded(ctx context.Context, e events.ItemAdded) error {
	l.record(e.ClientID, fmt.Sprintf("#%d add %s", e.Seq, e.Item))
	return nil
}

// OnCheckedOut records a checkout.
func (l *Ledger) OnCheckedOut(ctx context.Context, e *events.CartCheckedOut) error {
	l.record(e.ClientID, fmt.Sprintf("#%d checkout %s", e.Seq, e.OrderID))
	return nil
}

func (l *Ledger) record(client, what string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.applied[client] = append(l.applied[client], what)
}

// Applied returns a copy of what was applied for client, in order.
func (l *Ledger) Applied(client string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.applied[client]...)
}
