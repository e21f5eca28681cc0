package runtime

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/seqby/seqby/runtime/internal/rdb"
)

// TestRecordRoundTrip makes records as an outbox's Add does and publishes
// them as its relay does: once per message id, to the stream Publish
// would have used, with the fields Publish writes.
func TestRecordRoundTrip(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	p := NewPublisher(c, PublisherOptions{})
	r, err := NewRecord(ctx, ev("client-1", 7), nil, WithMessageID("m-1"))
	if err != nil {
		t.Fatal(err)
	}
	if r.Category != "order" || r.Key != "client-1" || !r.Partitioned || r.Type != "testEvent" || r.MessageID != "m-1" {
		t.Fatalf("record %+v", r)
	}
	for range 2 { // the second is a relay's re-publish after a crash
		if err := p.PublishRecord(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	xs := c.XRange(ctx, "order:{client-1}", "-", "+").Val()
	if len(xs) != 1 {
		t.Fatalf("%d entries, want 1 (the message id deduplicates)", len(xs))
	}
	var got testEvent
	if err := json.Unmarshal([]byte(xs[0].Values[rdb.FieldPayload].(string)), &got); err != nil || got != *ev("client-1", 7) {
		t.Fatalf("payload %v (%v)", xs[0].Values, err)
	}
	if xs[0].Values[rdb.FieldID] != "m-1" || xs[0].Values[rdb.FieldType] != "testEvent" {
		t.Fatalf("fields %v", xs[0].Values)
	}
	note, err := NewRecord(ctx, &testNote{Text: "hi"}, nil, AsBackfill())
	if err != nil || note.Partitioned || note.Backfill || note.MessageID == "" {
		t.Fatalf("note record %+v, %v", note, err)
	}
	for range 2 { // an unpartitioned record is deduplicated too
		if err := p.PublishRecord(ctx, note); err != nil {
			t.Fatalf("publish note: %v", err)
		}
	}
	if n := c.XLen(ctx, "note").Val(); n != 1 {
		t.Fatalf("note stream has %d entries, want 1", n)
	}
	if ttl := c.PTTL(ctx, "{note}:__msgid__:"+note.MessageID).Val(); ttl <= 0 {
		t.Fatalf("dedup key of the note has TTL %v, want the dedup window", ttl)
	}
}

// TestRecordRefused: a bad key fails NewRecord as it fails Publish, and a
// record that can never publish (written by older code or by hand) fails
// PublishRecord with an error an outbox relay can tell from an outage,
// before anything is written.
func TestRecordRefused(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	p := NewPublisher(c, PublisherOptions{BackfillSuffix: "late"})
	if _, err := NewRecord(ctx, ev("a:b", 1), nil); !errors.Is(err, ErrKeyColon) {
		t.Fatalf("NewRecord with key a:b: %v, want ErrKeyColon", err)
	}
	if _, err := NewRecord(ctx, ev("c", 1), nil, WaitForReplicas(1, 0)); !errors.Is(err, ErrPublish) {
		t.Fatalf("NewRecord with WaitForReplicas: %v", err)
	}
	// The publisher's options check a record as its PublishRecord will.
	if _, err := (PublisherOptions{BackfillSuffix: "late"}).NewRecord(ctx, ev("late", 1)); !errors.Is(err, ErrReservedKey) {
		t.Fatalf("record with key late for a publisher whose backfill suffix is late: %v, want ErrReservedKey", err)
	}
	good, err := NewRecord(ctx, ev("c", 1), nil)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		edit func(*Record)
		want error
	}{
		{"key with a colon", func(r *Record) { r.Key = "x:y" }, ErrKeyColon},
		{"empty key", func(r *Record) { r.Key = "" }, ErrEmptyKey},
		{"this publisher's backfill suffix", func(r *Record) { r.Key = "late" }, ErrReservedKey},
		{"empty category", func(r *Record) { r.Category = "" }, ErrInvalidRecord},
		{"no type", func(r *Record) { r.Type = "" }, ErrInvalidRecord},
		{"no message id", func(r *Record) { r.MessageID = "" }, ErrInvalidRecord},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := good
			tt.edit(&r)
			err := p.PublishRecord(ctx, r)
			if !errors.Is(err, tt.want) || errors.Is(err, ErrPublish) {
				t.Fatalf("got %v, want %v and not ErrPublish", err, tt.want)
			}
		})
	}
	if n := c.DBSize(ctx).Val(); n != 0 {
		t.Fatalf("%d keys written by refused records", n)
	}
}
