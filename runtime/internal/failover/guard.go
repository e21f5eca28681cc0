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
// event of those seconds is acked where its effect will be thrown away.
// Seen in CI as runs of about 100 events per key "not applied on the new
// primary" after a SENTINEL FAILOVER on a loaded machine, where Redis's
// failover docs (docs/runtime.md, "Failover") promise at most one.
//
// A Guard, added to the client as a hook (AddHook), sees every dial of
// both pools and keeps one rule: every connection it lets through is to
// the address of the latest-begun dial that completed. A dial that
// completes at another address than the current one moves the client
// there, closing every connection to the old address, unless a dial begun
// after it already reached the current one: then it is the stale one, and
// it is closed and dialled again (the sentinels are asked anew). So a
// client never holds connections to two primaries for longer than one
// dial. Closing a connection go-redis holds is what its own clean-up does:
// an idle one fails its health check and is dropped; a command in flight
// on it fails, as it would in any failover.
package failover

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"syscall"

	"github.com/redis/go-redis/v9"
)

// Guard is a go-redis hook (redis.Hook) for one failover client. Its zero
// value is not usable: use New.
type Guard struct {
	mu sync.Mutex
	// begun counts the dials begun; a dial's number orders it.
	begun uint64
	// primary is the address every open connection is to, and since the
	// number of the latest-begun dial that reached it.
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

// DialHook wraps the client's dial (redis.Hook).
func (g *Guard) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		// A stale dial is dialled again once, as the latest-begun dial,
		// which the guard takes unless yet another dial begun after it
		// moves the client first: then the command fails, as in any
		// failover, and go-redis's retry dials again.
		for try := 0; ; try++ {
			n := g.begin()
			c, err := next(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			w, ok := g.admit(c, n)
			if ok {
				return w, nil
			}
			at := c.RemoteAddr().String()
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

// begin numbers a dial.
func (g *Guard) begin() uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.begun++
	return g.begun
}

// admit lets c, dial number n, through, or reports it stale (false): it
// reached another address than the current one, which a dial begun after
// it reached.
func (g *Guard) admit(c net.Conn, n uint64) (net.Conn, bool) {
	at := c.RemoteAddr().String()
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case at == g.primary:
		g.since = max(g.since, n)
	case n < g.since:
		return nil, false
	default:
		// The client moved: nothing may stay on the old address.
		for o := range g.open {
			delete(g.open, o)
			o.Conn.Close()
		}
		g.primary, g.since = at, n
	}
	w := &conn{Conn: c, g: g}
	g.open[w] = struct{}{}
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
