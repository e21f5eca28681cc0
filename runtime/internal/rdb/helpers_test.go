package rdb

import (
	"context"

	"github.com/redis/go-redis/v9"
	"github.com/seqby/seqby/internal/poll"
	"github.com/seqby/seqby/internal/redistest"
)

// newRedis starts a private redis-server for the test and returns a client.
var newRedis = redistest.NewClient

// ctxT is a context for a test's Redis calls.
var ctxT = redistest.Context

// eventually polls cond until it holds; the test fails if it does not
// within the duration.
var eventually = poll.Until

// trimCategory trims stream for the groups registered for category, as the
// engine does.
func trimCategory(ctx context.Context, c redis.UniversalClient, category, stream string) (int64, error) {
	groups, err := Groups(ctx, c, category)
	if err != nil {
		return 0, err
	}
	return Trim(ctx, c, groups, stream)
}
