package runtime

import (
	"context"

	"github.com/seqby/seqby/runtime/internal/publish"
)

// Record is a message checked and encoded but not yet published: what a
// transactional outbox stores in the caller's transaction, for a relay to
// publish later with Publisher.PublishRecord. Every field is plain data, so
// it can be stored in a database row and read back by another process.
type Record struct {
	// Category is the message's stream category.
	Category string
	// Key is the partition key; "" when the category is not partitioned.
	Key string
	// Partitioned tells whether the category is partitioned (the message
	// implements Partitioned; one that also implements Unpartitioned is
	// refused).
	Partitioned bool
	// Backfill publishes to the partition's backfill lane (AsBackfill).
	Backfill bool
	// Type is the message's wire type name, which picks its decoder.
	Type string
	// MessageID is the message's id: the caller's (WithMessageID) or a
	// random one. PublishRecord publishes it as the idempotency key, so a
	// record published twice (a relay that crashed before marking it) is
	// stored once within the publisher's DedupWindow.
	MessageID string
	// Payload is the codec-encoded message.
	Payload []byte
	// Trace holds the trace context of the ctx the record was made in (W3C
	// trace context fields), empty when ctx carried no span.
	Trace map[string]string
}

// NewRecord checks msg as Publish does (its category, its partition key
// against the key rules with the default backfill suffix, the message id
// of WithMessageID) and encodes it with codec (nil: JSON). Nothing is
// written anywhere. A bad key fails with a *KeyError (errors.Is
// ErrInvalidKey), so an outbox's Add fails the caller's transaction
// before it records anything. Of opts, WithMessageID and AsBackfill apply;
// WaitForReplicas is refused. It is PublisherOptions{Codec:
// codec}.NewRecord; use that method to check and encode with the options
// of the publisher that will publish the record.
func NewRecord(ctx context.Context, msg Message, codec Codec, opts ...PublishOption) (Record, error) {
	return PublisherOptions{Codec: codec}.NewRecord(ctx, msg, opts...)
}

// NewRecord checks and encodes msg as a Publisher with these options would
// (its Codec, its BackfillSuffix for the key rules, its Propagator for the
// trace context of ctx), without writing anything; see the function
// NewRecord. A record made here with the options of the publisher that
// publishes it (PublishRecord) is refused by neither for its key.
func (o PublisherOptions) NewRecord(ctx context.Context, msg Message, opts ...PublishOption) (Record, error) {
	var cfg publishConfig
	for _, opt := range opts {
		opt(&cfg)
	}
	r, err := o.withDefaults().config().NewRecord(ctx, msg, cfg)
	return Record(r), err
}

// PublishRecord publishes a record made by NewRecord, as Publish would
// have published its message, with r.MessageID as the idempotency key
// (WithMessageID): a record published again within DedupWindow, say by a
// relay that crashed before it could mark it published, is stored once.
// The record is checked first against this publisher's rules: a bad key
// fails with a *KeyError (errors.Is ErrInvalidKey) and any other record
// that can never be published with ErrInvalidRecord, before anything is
// written; an outbox relay marks such a record abandoned instead of
// retrying it. Other failures match ErrPublish and may be retried.
func (p *Publisher) PublishRecord(ctx context.Context, r Record) error {
	// The two Record types have the same fields, so each converts to the
	// other.
	return p.p.PublishRecord(ctx, publish.Record(r))
}
