// Package billing holds the example's handlers: a ledger that must see each
// client's cart events in publish order, and a fulfilment process manager
// per order.
package billing

import (
	"context"
	"errors"
	"fmt"
	"sync"
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
	// Catalogue is the items the ledger knows (nil: every item but
	// "poison").
	Catalogue *Catalogue
}

// Journal records applied events. Append must refuse a caller whose lease
// is no longer current (a stalled owner resuming late), and must not apply
// an event twice: delivery is at least once, and the one event in flight
// when an owner dies runs again on the next owner.
//
// Guarding by a per-client sequence (skip seq <= the last applied) needs
// one exception: a replay (runtime.MessageInfo.Replay) of an event this
// handler halted on. The operator moved that event to the dead-letter
// stream, the client went on with its later events, and seqbyctl dlq
// replay appended the event again after them, with its old seq. It was
// never applied: Append must apply it (once per replay), not skip it as
// older than the last applied. A replay of an event another handler halted
// on is, for this one, a duplicate of the event it applied in its place.
type Journal interface {
	Append(ctx context.Context, client string, seq int, entry string) error
}

// ErrUnknownItem is the demo's poison: an item the catalogue does not
// have. It is permanent, so the client's partition halts at once.
var ErrUnknownItem = errors.New("the catalogue has no such item")

// Catalogue is the items a Ledger knows: every item but "poison", until
// Add adds it (the demo's fix, made before the operator replays the
// dead-lettered poison event). Safe for concurrent use.
type Catalogue struct {
	mu    sync.Mutex
	added map[string]bool
}

// Has reports whether the catalogue knows item.
func (c *Catalogue) Has(item string) bool {
	if item != "poison" {
		return true
	}
	if c == nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.added[item]
}

// Add makes the catalogue know item.
func (c *Catalogue) Add(item string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.added == nil {
		c.added = map[string]bool{}
	}
	c.added[item] = true
}

// OnItemAdded records an added item.
func (l *Ledger) OnItemAdded(ctx context.Context, e events.ItemAdded) error {
	if !l.Catalogue.Has(e.Item) {
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
	if mi, ok := runtime.MessageFromContext(ctx); ok && mi.Replay != nil {
		// Said in the journal, for the demo's story: "B #9 add poison
		// (replay of 1717000000000-0)".
		what += " (replay of " + mi.Replay.OriginalEntryID + ")"
	}
	return l.Journal.Append(ctx, client, seq, l.Engine+" "+what)
}
