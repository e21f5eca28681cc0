package rdb

import (
	"errors"
	"fmt"
	"testing"

	"github.com/redis/go-redis/v9"
)

// A publish refused at its first step writes nothing: here the user may
// write the partition stream but not the category index (NOPERM), and the
// entry must not be appended unindexed, where discovery would never find
// it.
func TestPublishRefusedIndexWritesNoEntry(t *testing.T) {
	admin, ctx := newRedis(t), ctxT(t)
	if err := admin.Do(ctx, "ACL", "SETUSER", "narrow", "on", ">pw", "+@all", "~order:*", "~{order}:__signal__").Err(); err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(&redis.Options{Addr: admin.Options().Addr, Username: "narrow", Password: "pw"})
	t.Cleanup(func() { c.Close() })
	stream := PartitionStream("order", "a")
	err := Publish(ctx, c, "order", "a", stream, 100, []any{FieldType, "T", FieldPayload, "{}"}, Once{})
	if err == nil || errors.Is(err, ErrUnsignalled) {
		t.Fatalf("publish without access to the index: %v, want the index step's error", err)
	}
	if n, _ := admin.Exists(ctx, stream).Result(); n != 0 {
		t.Fatalf("the entry was appended although its key could not be indexed")
	}
}

func TestSignalsLost(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	sig := SignalKey("order")
	if lost, err := SignalsLost(ctx, c, sig, "0-0"); lost || err != nil {
		t.Fatalf("no stream: %v %v", lost, err)
	}
	for i := 1; i <= 5; i++ {
		if err := c.XAdd(ctx, &redis.XAddArgs{Stream: sig, ID: fmt.Sprintf("%d-0", i), Values: []any{"k", i}}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.XTrimMinID(ctx, sig, "4-0").Err(); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		cursor string
		lost   bool
	}{{"0-0", true}, {"2-0", true}, {"3-0", true}, {"3-5", true}, {"4-0", false}, {"5-0", false}, {"9-0", false}} {
		if lost, err := SignalsLost(ctx, c, sig, tt.cursor); lost != tt.lost || err != nil {
			t.Errorf("cursor %s: lost %v (%v), want %v", tt.cursor, lost, err, tt.lost)
		}
	}
}
