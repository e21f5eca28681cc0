package rdb

import (
	"errors"
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
