package publish

import (
	"context"
	"fmt"
)

// Record is runtime.Record's twin, field for field, so that either
// converts to the other: runtime keeps the documented type, this package
// makes, checks and writes it.
type Record struct {
	Category    string
	Key         string // "" when the category is not partitioned
	Partitioned bool
	Backfill    bool
	Type        string // the wire type name
	MessageID   string
	Payload     []byte            // the codec-encoded message
	Trace       map[string]string // the trace context of the ctx it was made in
}

// NewRecord checks and encodes msg as Publish would, without writing
// anything: runtime.NewRecord. A wait for replicas is refused, since it
// belongs to a publish, which a record is not yet.
func (cfg Config) NewRecord(ctx context.Context, msg Message, call Call) (Record, error) {
	if call.Replicas > 0 {
		return Record{}, fmt.Errorf("record %s: WaitForReplicas applies to a publish, not a record: %w", TypeName(msg), ErrPublish)
	}
	return cfg.newRecord(ctx, msg, call)
}

// check re-applies the rules NewRecord applied, for a record that may have
// been written by older code or by hand: a bad key is what the key rule
// returns (ErrInvalidKey), anything else that can never publish
// ErrInvalidRecord.
func (cfg Config) check(r Record) error {
	if err := checkCategory(r.Category); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidRecord, err)
	}
	if r.Type == "" {
		return fmt.Errorf("record has no type name: %w", ErrInvalidRecord)
	}
	if rule := cfg.IDRule(r.MessageID); rule != nil {
		return fmt.Errorf("message id %q: %w: %w", r.MessageID, ErrInvalidRecord, rule)
	}
	if r.Partitioned {
		return cfg.KeyRule(r.Category, "key", r.Key, cfg.BackfillSuffix)
	}
	return nil
}

// PublishRecord checks r against this publisher's rules and publishes it
// as Publish would have published its message, with r.MessageID as the
// caller's id, so a record published twice is stored once within
// DedupWindow.
func (p *Publisher) PublishRecord(ctx context.Context, r Record) error {
	if err := p.cfg.check(r); err != nil {
		return fmt.Errorf("publish record %s %s: %w", r.Type, r.MessageID, err)
	}
	return p.write(ctx, r.Type, r.item(p.cfg.BackfillSuffix), Call{ID: r.MessageID, IDSet: true})
}
