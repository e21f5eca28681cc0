package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
)

// contractDoc is a type with no methods of seqby's, as one of another module
// declared by a marked alias would be.
type contractDoc struct {
	Account string `json:"account"`
}

func foreignContract(c *contractDoc) Message {
	return Foreign(c, "accounts", "contract", func() (string, error) { return Key("accounts", "account", c.Account) })
}

// TestForeign: a Foreign message is published as its value, under its
// type name, keyed by its key function; a nil value is refused by every
// publishing path before anything runs.
func TestForeign(t *testing.T) {
	ctx := context.Background()
	r, err := NewRecord(ctx, foreignContract(&contractDoc{Account: "a-1"}), nil)
	if err != nil {
		t.Fatal(err)
	}
	var back contractDoc
	if err := json.Unmarshal(r.Payload, &back); err != nil || back.Account != "a-1" || r.Type != "contract" || r.Key != "a-1" || !r.Partitioned {
		t.Fatalf("record %+v (%v)", r, err)
	}
	plain, err := NewRecord(ctx, Foreign(&contractDoc{}, "notes", "contract", nil), nil)
	if err != nil || plain.Partitioned {
		t.Fatalf("unkeyed foreign record %+v (%v)", plain, err)
	}
	if _, err := NewRecord(ctx, foreignContract(&contractDoc{Account: "a:b"}), nil); !errors.Is(err, ErrKeyColon) {
		t.Fatalf("bad key: %v", err)
	}
	nils := map[string]Message{
		"keyed nil pointer":   foreignContract(nil),
		"unkeyed nil pointer": Foreign((*contractDoc)(nil), "notes", "contract", nil),
		"nil value":           Foreign(nil, "notes", "contract", nil),
	}
	b := NewInlineBroker()
	for name, m := range nils {
		if _, err := NewRecord(ctx, m, nil); !errors.Is(err, ErrPublish) {
			t.Errorf("NewRecord of %s: %v, want ErrPublish", name, err)
		}
		if err := b.Publish(ctx, m); !errors.Is(err, ErrPublish) {
			t.Errorf("inline Publish of %s: %v, want ErrPublish", name, err)
		}
	}
}
