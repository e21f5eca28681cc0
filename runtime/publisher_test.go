package runtime

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/seqby/seqby/runtime/internal/rdb"
)

func TestPublishRouting(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	p := NewPublisher(c, PublisherOptions{})
	tests := []struct {
		name   string
		msg    Message
		opts   []PublishOption
		stream string
	}{
		{"partitioned", ev("client-1", 1), nil, "order:{client-1}"},
		{"backfill lane", ev("client-1", 2), []PublishOption{AsBackfill()}, "order:{client-1}:backfill"},
		{"unpartitioned", &testNote{Text: "hi"}, nil, "note"},
		{"unpartitioned ignores backfill", &testNote{Text: "x"}, []PublishOption{AsBackfill()}, "note"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := c.XLen(ctx, tt.stream).Val()
			if err := p.Publish(ctx, tt.msg, tt.opts...); err != nil {
				t.Fatal(err)
			}
			xs := c.XRevRangeN(ctx, tt.stream, "+", "-", 1).Val()
			if c.XLen(ctx, tt.stream).Val() != before+1 || len(xs) != 1 {
				t.Fatalf("no entry in %s", tt.stream)
			}
			f := xs[0].Values
			if f[rdb.FieldType] != typeName(tt.msg) || f[rdb.FieldID] == "" || f[rdb.FieldPayload] == "" || f[rdb.FieldPublishedAt] == "" {
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

func TestPublishBadKeyWritesNothing(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	p := NewPublisher(c, PublisherOptions{BackfillSuffix: "late"})
	tests := []struct {
		key  string
		rule error
	}{
		{"", ErrEmptyKey},
		{"a:b", ErrKeyColon},
		{"{a}", ErrKeyBrace},
		{"dlq", ErrReservedKey},
		{"late", ErrReservedKey},
		{"__partitions__", ErrSentinelKey},
		{"o-\xff", ErrKeyEncoding},
		{"a\x1b[2J", ErrKeyControl},
		{strings.Repeat("k", MaxKeyLength+1), ErrKeyLength},
	}
	for _, tt := range tests {
		err := p.Publish(ctx, ev(tt.key, 1))
		if !errors.Is(err, ErrInvalidKey) || !errors.Is(err, tt.rule) {
			t.Errorf("key %q: %v, want %v", tt.key, err, tt.rule)
		}
	}
	if n := c.DBSize(ctx).Val(); n != 0 {
		keys := c.Keys(ctx, "*").Val()
		t.Fatalf("bad keys wrote %d keys: %v", n, keys)
	}
}

// A signal stream is never capped below two reads of signals, whatever
// SignalMaxLen says: a reader can then tell when it lost signals.
func TestSignalMaxLenFloor(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	p := NewPublisher(c, PublisherOptions{SignalMaxLen: 100})
	var msgs []Message
	for i := range 3000 {
		msgs = append(msgs, ev(fmt.Sprint("k", i), i)) // one signal per key and batch
	}
	if err := p.PublishBatch(ctx, msgs); err != nil {
		t.Fatal(err)
	}
	if n := c.XLen(ctx, rdb.SignalKey("order")).Val(); n < 2*rdb.SignalBatch {
		t.Fatalf("the signal stream holds %d signals, want at least %d", n, 2*rdb.SignalBatch)
	}
}
