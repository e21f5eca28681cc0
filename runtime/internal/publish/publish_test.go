package publish

import (
	"errors"
	"testing"

	"github.com/seqby/seqby/runtime/internal/rdb"
)

func TestPublishRouting(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	p := New(c, testConfig())
	tests := []struct {
		name   string
		msg    Message
		call   Call
		stream string
	}{
		{"partitioned", ev("client-1", 1), Call{}, "order:{client-1}"},
		{"backfill lane", ev("client-1", 2), Call{Backfill: true}, "order:{client-1}:backfill"},
		{"unpartitioned", &testNote{Text: "hi"}, Call{}, "note"},
		{"unpartitioned ignores backfill", &testNote{Text: "x"}, Call{Backfill: true}, "note"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := c.XLen(ctx, tt.stream).Val()
			if err := p.Publish(ctx, tt.msg, tt.call); err != nil {
				t.Fatal(err)
			}
			xs := c.XRevRangeN(ctx, tt.stream, "+", "-", 1).Val()
			if c.XLen(ctx, tt.stream).Val() != before+1 || len(xs) != 1 {
				t.Fatalf("no entry in %s", tt.stream)
			}
			f := xs[0].Values
			if f[rdb.FieldType] != TypeName(tt.msg) || f[rdb.FieldID] == "" || f[rdb.FieldPayload] == "" || f[rdb.FieldPublishedAt] == "" {
				t.Fatalf("entry fields %v", f)
			}
		})
	}
	if got := c.SMembers(ctx, rdb.IndexKey("order")).Val(); len(got) != 1 || got[0] != "client-1" {
		t.Fatalf("index %v, want [client-1]", got)
	}
	if c.Exists(ctx, rdb.IndexKey("note")).Val() != 0 {
		t.Fatal("unpartitioned category got an index")
	}
	if c.XLen(ctx, rdb.SignalKey("order")).Val() != 2 {
		t.Fatal("partitioned publishes did not signal")
	}
}

// TestRulesStopTheWrite: the key rule sees the configured backfill
// suffix, and its error, like the id rule's, comes back as it is (so
// runtime's *KeyError still matches its rule), before anything is written.
func TestRulesStopTheWrite(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	cfg := testConfig()
	cfg.BackfillSuffix = "late"
	p := New(c, cfg)
	for _, tc := range []struct {
		name string
		msg  Message
		call Call
		want error
	}{
		{"empty key", ev("", 1), Call{}, errEmpty},
		{"key with a colon", ev("a:b", 1), Call{}, errColon},
		{"the configured suffix", ev("late", 1), Call{}, errColon},
		{"empty message id", ev("a", 1), Call{ID: "", IDSet: true}, ErrInvalidMessageID},
		{"empty message id, rule", &testNote{}, Call{ID: "", IDSet: true}, errEmpty},
	} {
		if err := p.Publish(ctx, tc.msg, tc.call); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	if _, err := p.PublishBatch(ctx, []Message{ev("a", 1), ev("late", 2)}, Call{}); !errors.Is(err, errColon) {
		t.Errorf("batch with a bad key: %v", err)
	}
	if n := c.DBSize(ctx).Val(); n != 0 {
		t.Fatalf("refused publishes wrote %d keys: %v", n, c.Keys(ctx, "*").Val())
	}
}

// TestRecordChecked: a record that can never publish (written by older
// code or by hand) is refused before anything is written: a bad key with
// the key rule's error, anything else with ErrInvalidRecord, and neither
// matches ErrPublish, so an outbox relay can tell it from an outage.
func TestRecordChecked(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	cfg := testConfig()
	cfg.BackfillSuffix = "late"
	p := New(c, cfg)
	good, err := cfg.NewRecord(ctx, ev("c", 1), Call{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cfg.NewRecord(ctx, ev("c", 1), Call{Replicas: 1}); !errors.Is(err, ErrPublish) {
		t.Fatalf("NewRecord waiting for replicas: %v, want ErrPublish", err)
	}
	for _, tc := range []struct {
		name string
		edit func(*Record)
		want error
	}{
		{"key with a colon", func(r *Record) { r.Key = "x:y" }, errColon},
		{"this publisher's backfill suffix", func(r *Record) { r.Key = "late" }, errColon},
		{"empty category", func(r *Record) { r.Category = "" }, ErrInvalidRecord},
		{"category with a brace", func(r *Record) { r.Category = "a{b" }, ErrInvalidRecord},
		{"no type", func(r *Record) { r.Type = "" }, ErrInvalidRecord},
		{"no message id", func(r *Record) { r.MessageID = "" }, errEmpty},
	} {
		r := good
		tc.edit(&r)
		if err := p.PublishRecord(ctx, r); !errors.Is(err, tc.want) || errors.Is(err, ErrPublish) {
			t.Errorf("%s: %v, want %v and not ErrPublish", tc.name, err, tc.want)
		}
	}
	if n := c.DBSize(ctx).Val(); n != 0 {
		t.Fatalf("%d keys written by refused records", n)
	}
	for range 2 { // a relay's re-publish after a crash stores nothing more
		if err := p.PublishRecord(ctx, good); err != nil {
			t.Fatal(err)
		}
	}
	if n := c.XLen(ctx, "order:{c}").Val(); n != 1 {
		t.Fatalf("%d entries, want 1 (the message id deduplicates)", n)
	}
}

// TestForeignAndNil: a Foreign message is encoded as its value, under its
// name, keyed by its key function; a nil message, a typed nil and a
// Foreign nil are refused.
func TestForeignAndNil(t *testing.T) {
	ctx := ctxT(t)
	cfg := testConfig()
	type contract struct {
		Account string `json:"account"`
	}
	r, err := cfg.NewRecord(ctx, Foreign(&contract{Account: "a-1"}, "accounts", "contract", func() (string, error) { return "a-1", nil }), Call{})
	if err != nil || string(r.Payload) != `{"account":"a-1"}` || r.Type != "contract" || r.Key != "a-1" || !r.Partitioned {
		t.Fatalf("record %+v (%v)", r, err)
	}
	for name, m := range map[string]Message{
		"nil":         nil,
		"typed nil":   (*testNote)(nil),
		"foreign nil": Foreign((*contract)(nil), "notes", "contract", nil),
	} {
		if _, err := cfg.NewRecord(ctx, m, Call{}); !errors.Is(err, ErrPublish) {
			t.Errorf("%s: %v, want ErrPublish", name, err)
		}
	}
}
