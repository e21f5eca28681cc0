package rdb

import (
	"context"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

// CreateGroup creates group on stream from id 0 (with MKSTREAM when mk).
// It reports whether the group exists now; without mk, a stream that does
// not exist yet is (false, nil): the group is created when it does.
func CreateGroup(ctx context.Context, c redis.UniversalClient, stream, group string, mk bool) (bool, error) {
	var err error
	if mk {
		err = c.XGroupCreateMkStream(ctx, stream, group, "0").Err()
	} else {
		err = c.XGroupCreate(ctx, stream, group, "0").Err()
	}
	if err == nil || strings.HasPrefix(err.Error(), "BUSYGROUP") {
		return true, nil
	}
	if !mk && strings.Contains(err.Error(), "requires the key to exist") {
		return false, nil
	}
	return false, fmt.Errorf("create group %s on %s: %w", group, stream, err)
}
