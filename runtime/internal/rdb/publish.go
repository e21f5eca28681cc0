package rdb

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// Publish appends one entry (fields: name/value pairs) to the stream of
// category's partition key (stream is that partition's stream or its
// backfill lane), records key in the category's index and signals idle
// consumers, in one atomic script. The signal stream is capped at about
// signalMaxLen entries.
func Publish(ctx context.Context, c redis.UniversalClient, category, key, stream string, signalMaxLen int64, fields []any) error {
	args := append([]any{key, signalMaxLen}, fields...)
	return scriptPublish.Run(ctx, c, []string{stream, IndexKey(category), SignalKey(category)}, args...).Err()
}

// PublishPlain appends one entry to an unpartitioned category's stream.
func PublishPlain(ctx context.Context, c redis.UniversalClient, category string, fields []any) error {
	return c.XAdd(ctx, &redis.XAddArgs{Stream: category, Values: fields}).Err()
}

// Partitions returns the keys in a partitioned category's index.
func Partitions(ctx context.Context, c redis.UniversalClient, category string) ([]string, error) {
	return c.SMembers(ctx, IndexKey(category)).Result()
}
