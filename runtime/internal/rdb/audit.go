package rdb

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
)

var scriptAudit = script("audit")

// AppendAudit appends an operator action (fields: name/value pairs) to
// AuditKey, trimming it to about AuditMaxLen entries, and returns the
// entry's id. The trim is approximate (MAXLEN ~) so it costs nothing
// until a whole stream node can go.
//
// op names the action (NewOp), written as the entry's field op: an
// append whose op an entry of the last OpTTL holds appends nothing and
// returns that entry's id, so an append Redis ran twice (its reply lost,
// then resent) records the action once (audit.lua).
func AppendAudit(ctx context.Context, c redis.UniversalClient, op string, fields []any) (string, error) {
	if op == "" {
		return "", errors.New("append to the audit stream: no op")
	}
	args := append([]any{AuditMaxLen, op, OpTTL.Milliseconds()}, fields...)
	id, err := scriptAudit.Run(ctx, c, []string{AuditKey}, args...).Text()
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
