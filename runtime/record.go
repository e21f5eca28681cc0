package runtime

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.opentelemetry.io/otel/propagation"

	"github.com/seqby/seqby/runtime/internal/rdb"
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
	if cfg.replicas > 0 {
		return Record{}, fmt.Errorf("record %s: WaitForReplicas applies to a publish, not a record: %w", typeName(msg), ErrPublish)
	}
	o = o.withDefaults()
	return newRecord(ctx, msg, o.Codec, o.Propagator, o.BackfillSuffix, cfg)
}

// newRecord checks and encodes msg; prepare and NewRecord share it.
func newRecord(ctx context.Context, msg Message, codec Codec, prop propagation.TextMapPropagator, suffix string, cfg publishConfig) (Record, error) {
	if msg == nil {
		return Record{}, fmt.Errorf("publish: nil message: %w", ErrPublish)
	}
	// A typed nil carries no event, and with value receivers even
	// StreamCategory panics on it: refuse it before calling anything.
	if isNilPointer(msg) {
		return Record{}, fmt.Errorf("publish %T: the message is a nil pointer; pass a pointer to a message value: %w", payloadOf(msg), ErrPublish)
	}
	category, err := streamCategory(msg)
	if err != nil {
		return Record{}, fmt.Errorf("publish %s: %w", typeName(msg), err)
	}
	if err := checkCategory(category); err != nil {
		return Record{}, fmt.Errorf("publish %s: %w: %w", typeName(msg), err, ErrPublish)
	}
	key, partitioned, err := partitionKey(msg, suffix)
	if err != nil {
		return Record{}, fmt.Errorf("publish %s: %w", typeName(msg), err)
	}
	id := newMessageID()
	if cfg.idSet {
		if rule := textRule(cfg.id); rule != nil {
			return Record{}, fmt.Errorf("publish %s: message id %q: %w: %w", typeName(msg), cfg.id, ErrInvalidMessageID, rule)
		}
		id = cfg.id
	}
	payload, err := codec.Marshal(payloadOf(msg))
	if err != nil {
		return Record{}, fmt.Errorf("publish %s: encode payload: %w", typeName(msg), err)
	}
	return Record{Category: category, Key: key, Partitioned: partitioned, Backfill: cfg.backfill && partitioned,
		Type: typeName(msg), MessageID: id, Payload: payload, Trace: traceContext(ctx, prop)}, nil
}

// checkCategory refuses a category no stream can be named after.
func checkCategory(category string) error {
	if category == "" || strings.ContainsAny(category, "{}") {
		return fmt.Errorf("stream category %q is empty or contains '{' or '}'", category)
	}
	return nil
}

// check re-applies the rules NewRecord applied, for a record that may have
// been written by older code or by hand: a bad key is a *KeyError
// (ErrInvalidKey), anything else that can never publish ErrInvalidRecord.
func (r Record) check(suffix string) error {
	if err := checkCategory(r.Category); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidRecord, err)
	}
	if r.Type == "" {
		return fmt.Errorf("record has no type name: %w", ErrInvalidRecord)
	}
	if rule := textRule(r.MessageID); rule != nil {
		return fmt.Errorf("message id %q: %w: %w", r.MessageID, ErrInvalidRecord, rule)
	}
	if r.Partitioned {
		return checkKeySuffix(r.Category, "key", r.Key, suffix)
	}
	return nil
}

// ErrInvalidRecord matches a Record that PublishRecord can never publish
// for a reason other than its key (which is ErrInvalidKey): an empty or
// malformed category, type name or message id. Retrying will not help.
var ErrInvalidRecord = errors.New("invalid record")

// fields are the stream entry fields of r.
func (r Record) fields(publishedAt time.Time) []any {
	f := []any{
		rdb.FieldType, r.Type,
		rdb.FieldID, r.MessageID,
		rdb.FieldPayload, r.Payload,
		rdb.FieldPublishedAt, publishedAt.UTC().Format(time.RFC3339Nano),
	}
	for k, v := range r.Trace {
		if !rdb.OwnField(k) {
			f = append(f, k, v)
		}
	}
	return f
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
	if err := r.check(p.opts.BackfillSuffix); err != nil {
		return fmt.Errorf("publish record %s %s: %w", r.Type, r.MessageID, err)
	}
	return p.write(ctx, r.Type, r.item(p.opts.BackfillSuffix), publishConfig{id: r.MessageID, idSet: true})
}

// item is r ready to write, its stream named with the backfill suffix.
func (r Record) item(suffix string) item {
	it := item{category: r.Category, key: r.Key, id: r.MessageID, partitioned: r.Partitioned, fields: r.fields(time.Now())}
	if r.Partitioned {
		it.stream = rdb.PartitionStream(r.Category, r.Key)
		if r.Backfill {
			it.stream = rdb.BackfillStream(r.Category, r.Key, suffix)
		}
	}
	return it
}
