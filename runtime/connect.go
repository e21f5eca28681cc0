package runtime

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/redis/go-redis/v9"
	"github.com/seqby/seqby/runtime/internal/failover"
)

// Connect returns a client for url, redis://[user:password@]host:port[/db]
// or rediss://... for TLS (server certificates are checked against the
// system's roots; SSL_CERT_FILE names another CA file). When the server is
// a Redis Cluster node, it returns a cluster client seeded with that node,
// so one URL names a single Redis or a whole cluster. A URL with a
// master_name parameter names Redis Sentinels instead, in go-redis's
// failover form: redis://[user:password@]sentinel:port[/db]?master_name=NAME
// with more sentinels as addr=host:port parameters (repeated), the user
// and password of the URL being the sentinels' and the primary's given as
// username= and password= parameters; Connect then returns a failover
// client, which follows the primary the sentinels name and keeps all its
// connections on one of them: a go-redis failover client of your own can,
// for seconds after a failover, send some commands to the old primary and
// the rest to the new one ("Failover" in docs/runtime.md). An empty url is
// ErrEmptyURL. Blocking reads honour context deadlines
// (ContextTimeoutEnabled). Close the client when done.
//
// Services with their own client configuration pass any
// redis.UniversalClient to NewEngine and NewPublisher instead.
func Connect(ctx context.Context, url string) (redis.UniversalClient, error) {
	if strings.TrimSpace(url) == "" {
		// go-redis would say "invalid URL scheme: ", which hides that
		// nothing was given at all.
		return nil, fmt.Errorf("runtime.Connect: %w: %w", ErrEmptyURL, ErrConnect)
	}
	if sentinelURL(url) {
		return connectSentinel(ctx, url)
	}
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
	defer probe.Close()
	if err := probe.Ping(ctx).Err(); err != nil {
		return nil, fmt.Errorf("reach %s: %w: %w", opts.Addr, ErrConnect, err)
	}
	info, err := probe.Info(ctx, "cluster").Result()
	switch {
	case err != nil && strings.HasPrefix(err.Error(), "NOPERM"):
		return nil, fmt.Errorf("ask %s whether it is a cluster node: grant the user +info: %w: %w", opts.Addr, ErrConnect, err)
	case err != nil && !isReply(err):
		return nil, fmt.Errorf("ask %s whether it is a cluster node: %w: %w", opts.Addr, ErrConnect, err)
	case err != nil || !strings.Contains(info, "cluster_enabled:1"):
		// A server that answers PING but has no cluster section in INFO (an
		// embedded test server) is not a cluster node either.
		return redis.NewClient(opts), nil
	}
	if opts.DB != 0 {
		return nil, fmt.Errorf("%s is a Redis Cluster node, which has only database 0; drop /%d from the URL: %w", opts.Addr, opts.DB, ErrConnect)
	}
	// The URL's settings apply to every node (pool_size is per node). TLS
	// checks every node's certificate against the seed's host name, as
	// go-redis's cluster URLs do: give the nodes certificates valid for it.
	return redis.NewClusterClient(&redis.ClusterOptions{
		Addrs:                 []string{opts.Addr},
		ClientName:            opts.ClientName,
		Protocol:              opts.Protocol,
		Username:              opts.Username,
		Password:              opts.Password,
		MaxRetries:            opts.MaxRetries,
		MinRetryBackoff:       opts.MinRetryBackoff,
		MaxRetryBackoff:       opts.MaxRetryBackoff,
		DialTimeout:           opts.DialTimeout,
		ReadTimeout:           opts.ReadTimeout,
		WriteTimeout:          opts.WriteTimeout,
		ContextTimeoutEnabled: true,
		PoolFIFO:              opts.PoolFIFO,
		PoolSize:              opts.PoolSize,
		PoolTimeout:           opts.PoolTimeout,
		MinIdleConns:          opts.MinIdleConns,
		MaxIdleConns:          opts.MaxIdleConns,
		MaxActiveConns:        opts.MaxActiveConns,
		ConnMaxIdleTime:       opts.ConnMaxIdleTime,
		ConnMaxLifetime:       opts.ConnMaxLifetime,
		TLSConfig:             opts.TLSConfig,
	}), nil
}

// isReply reports an error reply from the server, as opposed to a
// network or protocol failure.
func isReply(err error) bool {
	var reply redis.Error
	return errors.As(err, &reply)
}

// sentinelURL reports a URL naming sentinels: it has a master_name.
func sentinelURL(raw string) bool {
	u, err := url.Parse(raw)
	return err == nil && u.Query().Has("master_name")
}

// connectSentinel returns a failover client for a Sentinel URL, once it
// reached the primary the sentinels name.
func connectSentinel(ctx context.Context, raw string) (redis.UniversalClient, error) {
	opts, err := redis.ParseFailoverURL(raw)
	if err != nil {
		// The URL itself is not echoed: it may carry a password.
		return nil, fmt.Errorf("parse the Sentinel URL (want redis://[user:password@]sentinel:port[/db]?master_name=NAME[&addr=sentinel2:port]...): %w: %w", ErrConnect, err)
	}
	opts.ContextTimeoutEnabled = true
	// A failover client keeps retrying sentinels it cannot reach (35 s
	// measured with one unreachable sentinel): ask them once first.
	var reached bool
	var last error
	for _, addr := range opts.SentinelAddrs {
		sc := redis.NewSentinelClient(&redis.Options{Addr: addr, Username: opts.SentinelUsername, Password: opts.SentinelPassword,
			TLSConfig: opts.TLSConfig, DialTimeout: opts.DialTimeout, MaxRetries: -1, ContextTimeoutEnabled: true})
		last = sc.Ping(ctx).Err()
		sc.Close()
		if last == nil {
			reached = true
			break
		}
	}
	if !reached {
		return nil, fmt.Errorf("reach the sentinels %s: %w: %w", strings.Join(opts.SentinelAddrs, ", "), ErrConnect, last)
	}
	// go-redis can leave a connection dialled just before a failover on
	// the old primary while the rest move (package failover).
	guard := failover.Install(opts)
	c := redis.NewFailoverClient(opts)
	if guard != nil {
		c.AddHook(guard)
	}
	if err := c.Ping(ctx).Err(); err != nil {
		c.Close()
		return nil, fmt.Errorf("reach the primary %q through the sentinels %s: %w: %w", opts.MasterName, strings.Join(opts.SentinelAddrs, ", "), ErrConnect, err)
	}
	return c, nil
}
