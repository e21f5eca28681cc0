package publish

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
		{auditEmbeds{orderPlaced{"c-1"}}, `auditEmbeds has both a PartitionKey and a SeqbyUnpartitioned method (StreamCategory "audit"); seqgen writes one of them on a message type, never both: embedded field orderPlaced brings PartitionKey, declared on publish.orderPlaced; run seqgen again, which refuses the type until it is fixed and says how`, ""},
		{&refundEmbeds{notedEvent: &notedEvent{}, ClientID: "c-2"}, `refundEmbeds has both a PartitionKey and a SeqbyUnpartitioned method (StreamCategory "refunds"); seqgen writes one of them on a message type, never both: embedded field notedEvent brings SeqbyUnpartitioned, declared on publish.notedEvent; run`, ""},
		{deepEmbeds{auditEmbeds: auditEmbeds{orderPlaced{"c-3"}}}, `embedded field auditEmbeds.orderPlaced brings PartitionKey, declared on publish.orderPlaced, and field auditEmbeds brings SeqbyUnpartitioned, declared on publish.auditEmbeds; run`, ""},
		{auditOwnKeyed{}, `embedded field ownKeyed brings PartitionKey, declared on publish.ownKeyed; run`, "orderPlaced"},
		{shadowedKeyed{}, `embedded field notedEvent brings SeqbyUnpartitioned, declared on publish.notedEvent; run`, "orderPlaced"},
		{&auditNote{Text: "a"}, `auditNote has both a PartitionKey and a SeqbyUnpartitioned method (StreamCategory "audit"); seqgen writes one of them on a message type, never both: neither is promoted from an embedded field, so one was declared on the type by hand or after seqgen last ran; run seqgen again, which refuses the type until it is fixed`, ""},
	} {
		r, err := testConfig().NewRecord(ctx, tc.msg, Call{})
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
