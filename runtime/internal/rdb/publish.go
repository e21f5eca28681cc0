package rdb

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// Publish appends one entry (fields: name/value pairs) to stream, the
// stream (or backfill lane) of category's partition key. The partition's
// slot and the category's differ, so it takes three steps, in an order
// that never lets a consumer miss the entry:
//
//  1. the key joins the category's index, so discovery knows the
//     partition before it has the entry (an indexed partition without a
//     stream reads as empty, so a publisher that dies here leaves nothing
//     wrong);
//  2. the entry is appended;
//  3. a wake-up signal with the key is appended to the category's signal
//     stream (capped at about signalMaxLen), after the entry, so a woken
//     consumer finds it. A publisher that dies before this step leaves the
//     entry to the consumers' periodic re-check.
//
// A step that fails stops the publish with its error: the entry was
// appended only if step 2 succeeded, which an error matching ErrUnsignalled
// (step 3 failed) says.
func Publish(ctx context.Context, c redis.UniversalClient, category, key, stream string, signalMaxLen int64, fields []any) error {
	if err := c.SAdd(ctx, IndexKey(category), key).Err(); err != nil {
		return fmt.Errorf("index the partition: %w", err)
	}
	if err := c.XAdd(ctx, &redis.XAddArgs{Stream: stream, Values: fields}).Err(); err != nil {
		return fmt.Errorf("append the entry: %w", err)
	}
	if err := c.XAdd(ctx, &redis.XAddArgs{Stream: SignalKey(category), MaxLen: signalMaxLen, Approx: true,
		Values: []any{"k", key}}).Err(); err != nil {
		return fmt.Errorf("%w: %w", ErrUnsignalled, err)
	}
	return nil
}

// ErrUnsignalled means a publish stored its entry but could not signal
// idle consumers: they find the entry at their next periodic re-check.
var ErrUnsignalled = errors.New("the entry is stored, but waking idle consumers failed; they find it at their next re-check")

// PublishPlain appends one entry to an unpartitioned category's stream.
func PublishPlain(ctx context.Context, c redis.UniversalClient, category string, fields []any) error {
	return c.XAdd(ctx, &redis.XAddArgs{Stream: category, Values: fields}).Err()
}

// Partitions returns the keys in a partitioned category's index.
func Partitions(ctx context.Context, c redis.UniversalClient, category string) ([]string, error) {
	return c.SMembers(ctx, IndexKey(category)).Result()
}
