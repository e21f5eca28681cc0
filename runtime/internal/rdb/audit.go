package rdb

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// AppendAudit appends an operator action (fields: name/value pairs) to
// AuditKey, trimming it to about AuditMaxLen entries, and returns the
// entry's id. The trim is approximate (MAXLEN ~) so it costs nothing
// until a whole stream node can go.
func AppendAudit(ctx context.Context, c redis.UniversalClient, fields []any) (string, error) {
	id, err := c.XAdd(ctx, &redis.XAddArgs{Stream: AuditKey, MaxLen: AuditMaxLen, Approx: true, Values: fields}).Result()
	if err != nil {
		return "", fmt.Errorf("append to the audit stream %s: %w", AuditKey, err)
	}
	return id, nil
}

// AuditLog returns the newest n entries of AuditKey, newest first (none
// when the stream does not exist).
func AuditLog(ctx context.Context, c redis.UniversalClient, n int64) ([]Entry, error) {
	msgs, err := c.XRevRangeN(ctx, AuditKey, "+", "-", n).Result()
	if err != nil {
		return nil, fmt.Errorf("read the audit stream %s: %w", AuditKey, err)
	}
	return entries(AuditKey, msgs), nil
}
