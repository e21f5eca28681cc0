package runtime

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/seqby/seqby/runtime/internal/publish"
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
			Category: "audit", Type: publish.TypeName(msg),
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
