package runtime

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// auditNote is what seqgen writes for a message of the unpartitioned
// category "audit" (StreamCategory, SeqbyUnpartitioned), with a
// PartitionKey method of its own on the pointer, as if declared after
// seqgen ran.
type auditNote struct {
	Text string `json:"text"`
}

func (*auditNote) StreamCategory() string        { return "audit" }
func (*auditNote) SeqbyUnpartitioned()           {}
func (*auditNote) PartitionKey() (string, error) { return "x", nil }

// auditValue is the same with value receivers.
type auditValue struct {
	Text string `json:"text"`
}

func (auditValue) StreamCategory() string        { return "audit" }
func (auditValue) SeqbyUnpartitioned()           {}
func (auditValue) PartitionKey() (string, error) { return "x", nil }

// auditPlain is a hand-written message with no SeqbyUnpartitioned: its
// PartitionKey partitions it, as before.
type auditPlain struct {
	Text string `json:"text"`
}

func (auditPlain) StreamCategory() string        { return "audit" }
func (auditPlain) PartitionKey() (string, error) { return "x", nil }

// TestUnpartitionedIgnoresOwnPartitionKey: a message seqgen wrote as one
// of an unpartitioned category is refused, by NewRecord (so Publish,
// PublishBatch and an outbox) and by the inline broker, when it has a
// PartitionKey method too: it would go to audit:{x}, which no handler of
// "audit" reads. Nothing is delivered inline either.
func TestUnpartitionedIgnoresOwnPartitionKey(t *testing.T) {
	ctx := context.Background()
	for _, msg := range []Message{&auditNote{Text: "a"}, auditValue{Text: "b"}, &auditValue{Text: "c"}} {
		r, err := NewRecord(ctx, msg, nil)
		if !errors.Is(err, ErrPublish) || !strings.Contains(err.Error(), `has both a PartitionKey and a SeqbyUnpartitioned method (StreamCategory "audit")`) {
			t.Fatalf("NewRecord(%T) = %+v, %v; want the unpartitioned category's refusal", msg, r, err)
		}

		var delivered int
		b := NewInlineBroker()
		if err := b.Register(Registration{Name: "audit", Kind: EventHandler, Routes: []Route{{
			Category: "audit", Type: typeName(msg),
			Decode: func(Codec, []byte) (any, error) { return msg, nil },
			Invoke: func(context.Context, any, any) error { delivered++; return nil },
		}}}); err != nil {
			t.Fatal(err)
		}
		if err := b.Publish(ctx, msg); !errors.Is(err, ErrPublish) {
			t.Fatalf("inline Publish(%T) = %v; want ErrPublish", msg, err)
		}
		if delivered != 0 {
			t.Fatalf("inline broker delivered %T %d times", msg, delivered)
		}
	}

	r, err := NewRecord(ctx, auditPlain{Text: "d"}, nil)
	if err != nil || !r.Partitioned || r.Key != "x" {
		t.Fatalf("hand-written partitioned message: %+v, %v", r, err)
	}
}

// orderPlaced and notedEvent are what seqgen writes for an event of the
// partitioned category "orders" and one of the unpartitioned "notes";
// auditEmbeds and refundEmbeds embed them, as seqgen refuses since issue
// #40, so each gets the other's method by promotion.
type orderPlaced struct {
	ClientID string `json:"client_id"`
}

func (orderPlaced) StreamCategory() string          { return "orders" }
func (m orderPlaced) PartitionKey() (string, error) { return m.ClientID, nil }

type notedEvent struct {
	Text string `json:"text"`
}

func (notedEvent) StreamCategory() string { return "notes" }
func (notedEvent) SeqbyUnpartitioned()    {}

type auditEmbeds struct {
	orderPlaced
}

func (auditEmbeds) StreamCategory() string { return "audit" }
func (auditEmbeds) SeqbyUnpartitioned()    {}

type refundEmbeds struct {
	*notedEvent
	ClientID string `json:"client_id"`
}

func (refundEmbeds) StreamCategory() string          { return "refunds" }
func (m refundEmbeds) PartitionKey() (string, error) { return m.ClientID, nil }

type deepEmbeds struct {
	Inner struct{ refundEmbeds }
	auditEmbeds
}

// ownKeyed declares PartitionKey and embeds orderPlaced, whose own is
// hidden; shadowedKeyed embeds it beside notedEvent, and its own
// PartitionKey hides orderPlaced's.
type ownKeyed struct {
	orderPlaced
}

func (ownKeyed) PartitionKey() (string, error) { return "k", nil }

type auditOwnKeyed struct {
	ownKeyed
}

func (auditOwnKeyed) StreamCategory() string { return "audit" }
func (auditOwnKeyed) SeqbyUnpartitioned()    {}

type shadowedKeyed struct {
	orderPlaced
	notedEvent
}

func (shadowedKeyed) StreamCategory() string        { return "refunds" }
func (shadowedKeyed) PartitionKey() (string, error) { return "k", nil }

// TestBothPartitionedAndUnpartitioned: a message with both methods is
// refused with a message that names the methods and, when an embedded
// field brings one, that field and the type that declares the method; it
// does not call a partitioned category unpartitioned.
func TestBothPartitionedAndUnpartitioned(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		msg       Message
		want, not string
	}{
		{auditEmbeds{orderPlaced{"c-1"}}, `auditEmbeds has both a PartitionKey and a SeqbyUnpartitioned method (StreamCategory "audit"); seqgen writes one of them on a message type, never both: embedded field orderPlaced brings PartitionKey, declared on runtime.orderPlaced; run seqgen again, which refuses the type until it is fixed and says how`, ""},
		{&refundEmbeds{notedEvent: &notedEvent{}, ClientID: "c-2"}, `refundEmbeds has both a PartitionKey and a SeqbyUnpartitioned method (StreamCategory "refunds"); seqgen writes one of them on a message type, never both: embedded field notedEvent brings SeqbyUnpartitioned, declared on runtime.notedEvent; run`, ""},
		{deepEmbeds{auditEmbeds: auditEmbeds{orderPlaced{"c-3"}}}, `embedded field auditEmbeds.orderPlaced brings PartitionKey, declared on runtime.orderPlaced, and field auditEmbeds brings SeqbyUnpartitioned, declared on runtime.auditEmbeds; run`, ""},
		{auditOwnKeyed{}, `embedded field ownKeyed brings PartitionKey, declared on runtime.ownKeyed; run`, "orderPlaced"},
		{shadowedKeyed{}, `embedded field notedEvent brings SeqbyUnpartitioned, declared on runtime.notedEvent; run`, "orderPlaced"},
		{&auditNote{Text: "a"}, `auditNote has both a PartitionKey and a SeqbyUnpartitioned method (StreamCategory "audit"); seqgen writes one of them on a message type, never both: neither is promoted from an embedded field, so one was declared on the type by hand or after seqgen last ran; run seqgen again, which refuses the type until it is fixed`, ""},
	} {
		r, err := NewRecord(ctx, tc.msg, nil)
		if !errors.Is(err, ErrPublish) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewRecord(%T) = %+v, %v\nwant an error containing %s", tc.msg, r, err, tc.want)
		}
		if tc.not != "" && err != nil && strings.Contains(err.Error(), tc.not) {
			t.Errorf("NewRecord(%T): %v: names %s, whose method is hidden", tc.msg, err, tc.not)
		}
		if err != nil && strings.Contains(err.Error(), "not partitioned") {
			t.Errorf("NewRecord(%T): %v: says a category is not partitioned", tc.msg, err)
		}
	}
}
