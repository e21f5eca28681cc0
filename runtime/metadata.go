package runtime

import (
	"context"
	"time"

	"github.com/seqby/seqby/runtime/internal/rdb"
)

// MessageInfo describes the message a handler attempt is running on, so a
// handler can deduplicate (delivery is at least once) and tell a first
// attempt from a retry.
type MessageInfo struct {
	// Stream is the stream (lane) the entry was read from, EntryID its
	// stream entry id: together unique for the entry.
	Stream, EntryID string
	// MessageID is the id the message was published with: the caller's
	// (WithMessageID), or a random one. Two publishes of one message with
	// the same id within the publisher's dedup window are stored once.
	MessageID string
	// PublishedAt is when it was published (the publisher's clock); zero
	// when the entry does not say.
	PublishedAt time.Time
	// Attempt counts this process's attempts at the entry, from 1; it
	// restarts at 1 on a new owner and for each slow retry of a halted
	// head.
	Attempt int
	// Deliveries is how many times the entry was read by an owner (its
	// consumer group's delivery count; 0 when unknown, as for an unkeyed
	// handler).
	Deliveries int64
	// Generation is the lease generation of the attempt (0 without a
	// lease), as in LeaseFromContext.
	Generation int64
}

type messageInfoKey struct{}

// MessageFromContext returns the message a handler attempt runs on; false
// outside one.
func MessageFromContext(ctx context.Context) (MessageInfo, bool) {
	mi, ok := ctx.Value(messageInfoKey{}).(MessageInfo)
	return mi, ok
}

// withMessage gives an attempt's context its MessageInfo.
func withMessage(ctx context.Context, en rdb.Entry, attempt int) context.Context {
	mi := MessageInfo{Stream: en.Stream, EntryID: en.ID, Attempt: attempt, Deliveries: en.Deliveries}
	if en.Fields != nil {
		mi.MessageID = en.Fields[rdb.FieldID]
		mi.PublishedAt, _ = time.Parse(time.RFC3339Nano, en.Fields[rdb.FieldPublishedAt])
	}
	if li, ok := LeaseFromContext(ctx); ok {
		mi.Generation = li.Generation
	}
	return context.WithValue(ctx, messageInfoKey{}, mi)
}
