package runtime

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/seqby/seqby/runtime/internal/rdb"
)

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
