// Package billing holds the example's handlers: a ledger that must see each
// client's cart events in publish order, and a fulfilment process manager
// per order.
package billing

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/seqby/seqby/examples/orders/events"
	"github.com/seqby/seqby/runtime"
)

// Ledger applies each client's cart events to a Journal. Sequential by
// client_id: one client's events are applied one at a time, in publish
// order, whichever engine instance owns the client.
//
//seqby:handler
//seqby:key=client_id
type Ledger struct {
	// Engine names the instance applying, recorded with each event.
	Engine string
	// Journal records what was applied, fenced by the partition's lease.
	Journal Journal
	// Delay is how long applying one event takes (the demo slows its
	// ledger so an engine can be killed in the middle of a run).
	Delay time.Duration
}

// Journal records applied events. Append must refuse a caller whose lease
// is no longer current (a stalled owner resuming late), and must not apply
// an event twice: delivery is at least once, and the one event in flight
// when an owner dies runs again on the next owner.
type Journal interface {
	Append(ctx context.Context, client string, seq int, entry string) error
}

// ErrUnknownItem is the demo's poison: an item the catalogue does not
// have. It is permanent, so the client's partition halts at once.
var ErrUnknownItem = errors.New("the catalogue has no such item")

// OnItemAdded records an added item.
func (l *Ledger) OnItemAdded(ctx context.Context, e events.ItemAdded) error {
	if e.Item == "poison" {
		return runtime.Permanent(fmt.Errorf("add %q for %s (#%d): %w", e.Item, e.ClientID, e.Seq, ErrUnknownItem))
	}
	return l.apply(ctx, e.ClientID, e.Seq, fmt.Sprintf("#%d add %s", e.Seq, e.Item))
}

// OnCheckedOut records a checkout.
func (l *Ledger) OnCheckedOut(ctx context.Context, e *events.CartCheckedOut) error {
	return l.apply(ctx, e.ClientID, e.Seq, fmt.Sprintf("#%d checkout %s", e.Seq, e.OrderID))
}

func (l *Ledger) apply(ctx context.Context, client string, seq int, what string) error {
	if l.Delay > 0 {
		t := time.NewTimer(l.Delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
	}
	return l.Journal.Append(ctx, client, seq, l.Engine+" "+what)
}
