// Package failover keeps a Sentinel failover client's connections on one
// primary at a time.
//
// go-redis's failover client (9.23) follows a failover by closing the
// connections that are not to the new primary, in its main pool and in
// its pipeline pool, when it learns of the switch. A connection whose dial
// was under way at that moment is not in the pool yet, so it survives: it
// was sent to the old primary (the address the sentinels named when it
// began) and joins its pool after the clean-up, where it serves commands
// until the sentinels turn the old primary into a replica, seconds later.
// Meanwhile the other connections reach the new primary. The engine then
// writes to two primaries at once: an attempt's commit (one pool) on the
// old one, its ack (a pipeline, the other pool) on the new one, and every
// event of those seconds is acked where its effect will be thrown away,
// where seqby's docs (docs/runtime.md, "Failover") promise at most one.
// TestGuardFollowsASentinelFailover forces the race.
//
// A Guard is both the client's Dialer (Guard.Dialer, which sees the
// address the sentinels named for each dial) and a hook on it (AddHook:
// DialHook sees every dial of the client's pools complete). Each dial is
// numbered when its address is known, and the guard keeps one rule:
// every connection it lets through is to the address of the latest-
// numbered dial that completed. A dial that completes at another address
// than the current one moves the client there, closing every connection
// to the old address, unless a dial numbered after it already reached the
// current one: then it is the stale one, and it is closed and dialled
// again (the sentinels are asked anew). So a client holds connections to
// two primaries for no longer than one dial, and once any dial reaches the
// new primary nothing stays on the old one. (A switch go-redis learns of
// from the sentinels' +switch-master message, before any dial reached the
// new primary, is go-redis's to act on: it closes the pools' connections
// to the old primary itself.)
//
// Closing a connection go-redis holds is what its own clean-up does: an
// idle plain TCP connection fails the pool's health check and is dropped
// unseen; an idle TLS one (the check cannot look through TLS) fails its
// next command, as a command in flight does, as in any failover. The
// guard also closes pub/sub and Conn() connections, which go-redis's
// clean-up leaves: a subscription reconnects.
//
// Connections dialled before the hook is added (a pool's MinIdleConns,
// dialled in NewFailoverClient) are not tracked: go-redis's clean-up
// covers them. A client reading from replicas (ReplicaOnly) is not
// guarded: every dial there goes to a replica of its choice.
package failover

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// DialFunc dials addr, as redis.FailoverOptions.Dialer.
type DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error)

// Guard keeps one failover client on one primary. Its zero value is not
// usable: use New.
type Guard struct {
	mu sync.Mutex
	// numbered counts the dials numbered; a dial's number orders it.
	numbered uint64
	// primary is the address every open connection is to, and since the
	// number of the latest dial that reached it.
	primary string
	since   uint64
	// open are the connections let through and not closed yet, all to
	// primary: what a move closes. A connection leaves it when it is
	// closed, by go-redis or by a move, so it holds at most the pools'
	// connections.
	open map[*conn]struct{}
}

// New returns a Guard with no connection yet.
func New() *Guard { return &Guard{open: map[*conn]struct{}{}} }

// Install installs a new Guard on the failover client that opts will build:
// it sets opts.Dialer (around the one opts has, else go-redis's own dial)
// and returns the hook to add once the client is built (AddHook). A
// client reading from replicas (opts.ReplicaOnly) gets none (nil).
func Install(opts *redis.FailoverOptions) redis.Hook {
	if opts.ReplicaOnly {
		return nil
	}
	g := New()
	base := opts.Dialer
	if base == nil {
		base = defaultDial(opts.DialTimeout, opts.TLSConfig)
	}
	opts.Dialer = g.Dialer(base)
	return g
}

// defaultDial is go-redis's dial when FailoverOptions.Dialer is nil (and
// Options.Dialer's for the sentinels, which use the same option): TCP
// with its keep-alive policy, TLS when configured.
func defaultDial(timeout time.Duration, cfg *tls.Config) DialFunc {
	d := &net.Dialer{
		// go-redis's default, which it applies to the sentinels' dial
		// when none is set.
		Timeout: cmp.Or(timeout, 5*time.Second),
		KeepAliveConfig: net.KeepAliveConfig{Enable: true, Idle: 30 * time.Second,
			Interval: 5 * time.Second, Count: 3},
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if cfg == nil {
			return d.DialContext(ctx, network, addr)
		}
		return tls.DialWithDialer(d, network, addr, cfg)
	}
}

// dialKey carries a dial's note from DialHook to Dialer.
type dialKey struct{}

// dialNote is what Dialer learns of a dial: the address the sentinels
// named, and the dial's number, taken then.
type dialNote struct {
	addr string
	n    uint64
}

// Dialer wraps the client's dial: it notes the address the sentinels
// named for a dial of the client's pools (DialHook's context carries the
// note; the sentinels' own dials, which share the option, carry none)
// and numbers the dial then, once its address is known.
func (g *Guard) Dialer(base DialFunc) DialFunc {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if note, ok := ctx.Value(dialKey{}).(*dialNote); ok {
			note.addr, note.n = addr, g.number()
		}
		return base(ctx, network, addr)
	}
}

// DialHook checks every dial of the client's pools as it completes
// (redis.Hook). Without Dialer installed it numbers a dial when it begins
// and takes the address the connection reached.
func (g *Guard) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		// A stale dial is dialled again once, as the latest dial, which
		// the guard takes unless yet another dial numbered after it moves
		// the client first: then this dial fails with ErrMoved, which the
		// pool retries as it retries any failed dial.
		for try := 0; ; try++ {
			note := &dialNote{}
			fallback := g.number()
			c, err := next(context.WithValue(ctx, dialKey{}, note), network, addr)
			if err != nil {
				return nil, err
			}
			at, n := note.addr, note.n
			if at == "" {
				at, n = c.RemoteAddr().String(), fallback
			}
			w, ok := g.admit(c, at, n)
			if ok {
				return w, nil
			}
			c.Close()
			if try == 1 {
				return nil, fmt.Errorf("dial %s: %w", at, ErrMoved)
			}
		}
	}
}

// ErrMoved is a dial's failure when the connection reached an address the
// client has moved away from, twice in a row: the sentinels named a new
// primary while it was dialled.
var ErrMoved = errors.New("the connection reached a primary the client has moved away from (a failover is under way)")

// ProcessHook passes commands through (redis.Hook).
func (g *Guard) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

// ProcessPipelineHook passes pipelines through (redis.Hook).
func (g *Guard) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// number numbers a dial.
func (g *Guard) number() uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.numbered++
	return g.numbered
}

// admit lets c, dial number n to address at, through, or reports it stale
// (false): at is not the current address, which a dial numbered after n
// reached. A move closes the old connections after the lock is released:
// closing a TLS connection writes to it, which may wait.
func (g *Guard) admit(c net.Conn, at string, n uint64) (net.Conn, bool) {
	g.mu.Lock()
	var old map[*conn]struct{}
	switch {
	case at == g.primary:
		g.since = max(g.since, n)
	case n < g.since:
		g.mu.Unlock()
		return nil, false
	default:
		// The client moved: nothing may stay on the old address.
		old, g.open = g.open, map[*conn]struct{}{}
		g.primary, g.since = at, n
	}
	w := &conn{Conn: c, g: g}
	g.open[w] = struct{}{}
	g.mu.Unlock()
	for o := range old {
		o.Conn.Close()
	}
	if _, ok := c.(syscall.Conn); ok {
		// go-redis checks an idle connection's health through its file
		// descriptor; a TLS connection it unwraps (NetConn).
		return sysConn{w}, true
	}
	return w, true
}

// Open reports how many connections the guard tracks, and to where: for
// tests.
func (g *Guard) Open() (n int, primary string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.open), g.primary
}

// conn is a connection the guard let through.
type conn struct {
	net.Conn
	g *Guard
}

// Close closes the connection and forgets it.
func (c *conn) Close() error {
	c.g.mu.Lock()
	delete(c.g.open, c)
	c.g.mu.Unlock()
	return c.Conn.Close()
}

// NetConn is the connection underneath, as crypto/tls.Conn's: go-redis
// unwraps connections through it to reach a file descriptor.
func (c *conn) NetConn() net.Conn { return c.Conn }

// sysConn is a conn over a connection with a file descriptor.
type sysConn struct{ *conn }

// SyscallConn is the descriptor of the connection underneath.
func (c sysConn) SyscallConn() (syscall.RawConn, error) {
	return c.Conn.(syscall.Conn).SyscallConn()
}
