package lease

import (
	"log/slog"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seqby/seqby/internal/logsink"
	"github.com/seqby/seqby/internal/redistest"
	"github.com/seqby/seqby/runtime/internal/membership"
	"github.com/seqby/seqby/runtime/internal/rdb"
)

// newRedis starts a private redis-server for the test and returns a client.
var newRedis = redistest.NewClient

// ctxT is a context for a test's Redis calls.
var ctxT = redistest.Context

// newLeases returns the Leases of a fresh incarnation of owner on c, with
// the engine's test timings and LeaseTTL ttl, logging to log (nil: none).
func newLeases(t *testing.T, c redis.UniversalClient, owner string, ttl time.Duration, log *logsink.Buffer) *Leases {
	t.Helper()
	if err := rdb.LoadScripts(ctxT(t), c); err != nil {
		t.Fatal(err)
	}
	cfg := Config{Client: c, Batch: rdb.NewBatcher(c), Incarnation: membership.NewIncarnation(owner),
		LeaseTTL: ttl, LeaseMargin: ttl / 10, HeartbeatInterval: ttl / 5, VerifyBound: DefaultVerifyBound,
		RetryBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond}
	if log != nil {
		cfg.Log = slog.New(slog.NewTextHandler(log, nil))
	}
	return New(cfg)
}
