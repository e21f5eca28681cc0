package runtime

import (
	"context"
	"time"

	"github.com/seqby/seqby/runtime/internal/executor"
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
	// the same id within the publisher's dedup window are stored once. A
	// replay keeps the original's (see Replay).
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
	// Replay is set when the entry is an operator's replay of a
	// dead-letter entry (seqbyctl dlq replay, inspect.ReplayDLQ): what the
	// entry originally was. nil for every other entry. A handler that
	// deduplicates by a per-key sequence must look at it: see ReplayInfo.
	Replay *ReplayInfo
}

// ReplayInfo says what a replayed entry originally was. A replay appends
// the dead-lettered message again at the end of its partition stream,
// after the entries published since the original, with the original's
// fields, MessageID included; Stream and EntryID of its MessageInfo are
// the new entry's.
//
// Every handler of the category gets the replay, in that new place:
//
//   - The handler that halted on the original (Handler) never applied it:
//     its attempts failed, and the operator moved it to the dead-letter
//     stream so the partition could go on without it. It must apply the
//     replay, even though it has applied later entries of the key since:
//     a handler that skips an entry whose per-key sequence is at or below
//     the last one it applied (the usual guard against an entry re-run
//     after a crash) would silently drop it. Apply it out of sequence,
//     without moving that sequence back, and deduplicate the replay itself
//     (it is delivered at least once, like every entry) by its own
//     identity: DLQ and DLQEntryID, or the new Stream and EntryID.
//   - Every other handler of the category had the original in its place
//     and handled it then: for it, the replay is a duplicate of the
//     original (OriginalEntryID, MessageID); its usual deduplication (by
//     sequence or by message id) drops it.
//
// A handler that deduplicates by MessageID alone, recording the id with
// its effect, treats both cases right without looking here: the handler
// that halted never recorded the id, the others did.
type ReplayInfo struct {
	// OriginalStream and OriginalEntryID are the original entry: the
	// lane it was on and its entry id there (for a replay of a replay,
	// the earlier replay's entry).
	OriginalStream, OriginalEntryID string
	// DLQ and DLQEntryID are the dead-letter entry the message was
	// replayed from (category:{key}:dlq and its id there): unique per
	// replay, since a dead-letter entry is replayed at most once.
	DLQ, DLQEntryID string
	// Handler is the handler that halted on the original and whose
	// operator moved it to the dead-letter stream (its Registration.Name,
	// as LeaseInfo.Handler): the handler the replay is meant for.
	Handler string
}

// MessageFromContext returns the message a handler attempt runs on; false
// outside one.
func MessageFromContext(ctx context.Context) (MessageInfo, bool) {
	mi, ok := executor.MessageFrom(ctx)
	if !ok {
		return MessageInfo{}, false
	}
	return MessageInfo{Stream: mi.Stream, EntryID: mi.EntryID, MessageID: mi.MessageID, PublishedAt: mi.PublishedAt,
		Attempt: mi.Attempt, Deliveries: mi.Deliveries, Generation: mi.Generation, Replay: (*ReplayInfo)(mi.Replay)}, true
}
