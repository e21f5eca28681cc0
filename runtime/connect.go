package runtime

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

// ErrConnect matches every error Connect returns.
var ErrConnect = errors.New("cannot connect to Redis")

// Connect returns a client for url, redis://[user:password@]host:port[/db]
// or rediss://... for TLS (server certificates are checked against the
// system's roots; SSL_CERT_FILE names another CA file). When the server is
// a Redis Cluster node, it returns a cluster client seeded with that node,
// so one URL names a single Redis or a whole cluster. Blocking reads honour
// context deadlines (ContextTimeoutEnabled). Close the client when done.
//
// Services with their own client configuration pass any
// redis.UniversalClient to NewEngine and NewPublisher instead.
func Connect(ctx context.Context, url string) (redis.UniversalClient, error) {
	opts, err := redis.ParseURL(url)
	if err != nil {
		// The URL itself is not echoed: it may carry a password.
		return nil, fmt.Errorf("parse the Redis URL (want redis://[user:password@]host:port[/db] or rediss://...): %w: %w", ErrConnect, err)
	}
	opts.ContextTimeoutEnabled = true
	// Probe on database 0: a cluster node refuses SELECT.
	probeOpts := *opts
	probeOpts.DB = 0
	probe := redis.NewClient(&probeOpts)
	info, err := probe.Info(ctx, "cluster").Result()
	probe.Close()
	var reply redis.Error
	switch {
	case err != nil && strings.HasPrefix(err.Error(), "NOPERM"):
		return nil, fmt.Errorf("ask %s whether it is a cluster node: grant the user +info: %w: %w", opts.Addr, ErrConnect, err)
	case err != nil && !errors.As(err, &reply):
		return nil, fmt.Errorf("ask %s whether it is a cluster node: %w: %w", opts.Addr, ErrConnect, err)
	}
	// A server that answers but has no cluster section (an embedded test
	// server) is not a cluster node either.
	if err != nil || !strings.Contains(info, "cluster_enabled:1") {
		return redis.NewClient(opts), nil
	}
	if opts.DB != 0 {
		return nil, fmt.Errorf("%s is a Redis Cluster node, which has only database 0; drop /%d from the URL: %w", opts.Addr, opts.DB, ErrConnect)
	}
	return redis.NewClusterClient(&redis.ClusterOptions{
		Addrs:                 []string{opts.Addr},
		Username:              opts.Username,
		Password:              opts.Password,
		TLSConfig:             opts.TLSConfig,
		ContextTimeoutEnabled: true,
	}), nil
}
