package maintenance

import (
	"context"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seqby/seqby/internal/logsink"
	"github.com/seqby/seqby/internal/poll"
	"github.com/seqby/seqby/internal/redistest"
	"github.com/seqby/seqby/runtime/internal/rdb"
)

// newRedis starts a private redis-server for the test and returns a client.
var newRedis = redistest.NewClient

// ctxT is a context for a test's Redis calls.
var ctxT = redistest.Context

// eventually polls cond until it holds; the test fails if it does not
// within the duration.
var eventually = poll.Until

// testConfig is a Config on c with the engine tests' timings (LeaseTTL
// 1s, DiscoveryInterval 50ms), reaping what is cold for a millisecond,
// logging at debug level to logs.
func testConfig(c redis.UniversalClient, owner string, logs *logsink.Buffer) Config {
	return Config{Client: c, Owner: owner, Incarnation: owner + "~test", LeaseTTL: time.Second,
		DiscoveryInterval: 50 * time.Millisecond, ReapAfter: time.Millisecond, BackfillSuffix: rdb.DefaultBackfillSuffix,
		MemberTTL: time.Second, Log: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}
}

// slowHook delays every command of a client by d: a slow link to Redis.
type slowHook time.Duration

func (slowHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h slowHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		time.Sleep(time.Duration(h)) // the link's latency, not a wait for anything
		return next(ctx, cmd)
	}
}
func (h slowHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		time.Sleep(time.Duration(h))
		return next(ctx, cmds)
	}
}
