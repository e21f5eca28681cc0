package failover

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seqby/seqby/internal/redistest"
)

// listen starts a loopback listener that accepts and holds connections
// until the test ends.
func listen(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var held []net.Conn
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			c.Close()
		}
	})
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
		}
	}()
	return l.Addr().String()
}

// closed reports whether c was closed on this side.
func closed(c net.Conn) bool {
	_, err := c.Write([]byte("x"))
	return errors.Is(err, net.ErrClosed)
}

// dials is a dial hook's next whose i-th call dials to[i], once gate[i]
// (if any) is closed.
type dials struct {
	to    []string
	gate  map[int]chan struct{}
	begun map[int]chan struct{}
	n     atomic.Int32
}

func (d *dials) next(ctx context.Context, network, _ string) (net.Conn, error) {
	i := int(d.n.Add(1)) - 1
	if ch := d.begun[i]; ch != nil {
		close(ch)
	}
	if ch := d.gate[i]; ch != nil {
		<-ch
	}
	return (&net.Dialer{}).DialContext(ctx, network, d.to[i])
}

func TestGuard(t *testing.T) {
	a, b := listen(t), listen(t)
	ctx := context.Background()
	t.Run("connections to one address are all kept", func(t *testing.T) {
		g := New()
		d := &dials{to: []string{a, a}}
		dial := g.DialHook(d.next)
		c1, err1 := dial(ctx, "tcp", "FailoverClient")
		c2, err2 := dial(ctx, "tcp", "FailoverClient")
		if err := errors.Join(err1, err2); err != nil {
			t.Fatal(err)
		}
		if closed(c1) || closed(c2) {
			t.Fatal("a connection to the one address was closed")
		}
		if n, p := g.Open(); n != 2 || p != a {
			t.Fatalf("open %d to %s, want 2 to %s", n, p, a)
		}
	})
	t.Run("a move closes the connections to the old address", func(t *testing.T) {
		g := New()
		d := &dials{to: []string{a, a, b}}
		dial := g.DialHook(d.next)
		c1, _ := dial(ctx, "tcp", "FailoverClient")
		c2, _ := dial(ctx, "tcp", "FailoverClient")
		c3, err := dial(ctx, "tcp", "FailoverClient")
		if err != nil {
			t.Fatal(err)
		}
		if !closed(c1) || !closed(c2) || closed(c3) {
			t.Fatalf("closed: old %v %v, new %v; want the old ones only", closed(c1), closed(c2), closed(c3))
		}
		if n, p := g.Open(); n != 1 || p != b {
			t.Fatalf("open %d to %s, want 1 to %s", n, p, b)
		}
	})
	t.Run("a dial overtaken by a move is dialled again", func(t *testing.T) {
		// Dial 0 (to a) begins, dial 1 (to b) begins after it and completes
		// first: dial 0 is the stale one, closed and dialled again (dial 2).
		g := New()
		d := &dials{to: []string{a, b, b}, gate: map[int]chan struct{}{0: make(chan struct{})}, begun: map[int]chan struct{}{0: make(chan struct{})}}
		dial := g.DialHook(d.next)
		stale := make(chan net.Conn, 1)
		go func() {
			c, err := dial(ctx, "tcp", "FailoverClient")
			if err != nil {
				t.Error(err)
			}
			stale <- c
		}()
		<-d.begun[0]
		fresh, err := dial(ctx, "tcp", "FailoverClient")
		if err != nil {
			t.Fatal(err)
		}
		close(d.gate[0])
		c := <-stale
		if c == nil {
			t.FailNow()
		}
		if got := c.RemoteAddr().String(); got != b {
			t.Fatalf("the overtaken dial reached %s, want %s (dialled again)", got, b)
		}
		if closed(fresh) || closed(c) {
			t.Fatal("a connection to the current address was closed")
		}
		if n, p := g.Open(); n != 2 || p != b {
			t.Fatalf("open %d to %s, want 2 to %s", n, p, b)
		}
	})
	t.Run("overtaken twice fails the dial", func(t *testing.T) {
		g := New()
		gate0, gate2 := make(chan struct{}), make(chan struct{})
		d := &dials{to: []string{a, b, b, a}, gate: map[int]chan struct{}{0: gate0, 2: gate2},
			begun: map[int]chan struct{}{0: make(chan struct{}), 2: make(chan struct{})}}
		dial := g.DialHook(d.next)
		errc := make(chan error, 1)
		go func() {
			_, err := dial(ctx, "tcp", "FailoverClient")
			errc <- err
		}()
		<-d.begun[0]
		if _, err := dial(ctx, "tcp", "FailoverClient"); err != nil { // 1: to b
			t.Fatal(err)
		}
		close(gate0) // 0 completes at a: stale; its retry (2) waits
		<-d.begun[2]
		if _, err := dial(ctx, "tcp", "FailoverClient"); err != nil { // 3: to a, begun after 2
			t.Fatal(err)
		}
		close(gate2) // 2 completes at b: stale again
		if err := <-errc; !errors.Is(err, ErrMoved) {
			t.Fatalf("got %v, want ErrMoved", err)
		}
	})
	t.Run("the named address decides, not the one reached", func(t *testing.T) {
		// One name the sentinels give, resolved to a different address at
		// each dial (a name with several addresses, IPv4 and IPv6): one
		// primary, nothing closed.
		g := New()
		d := &dials{to: []string{a, b, a}}
		dial := g.DialHook(func(ctx context.Context, network, _ string) (net.Conn, error) {
			return g.Dialer(d.next)(ctx, network, "primary.example:6379")
		})
		var cs []net.Conn
		for range 3 {
			c, err := dial(ctx, "tcp", "FailoverClient")
			if err != nil {
				t.Fatal(err)
			}
			cs = append(cs, c)
		}
		for i, c := range cs {
			if closed(c) {
				t.Errorf("connection %d (to %s) closed", i, c.RemoteAddr())
			}
		}
		if n, p := g.Open(); n != 3 || p != "primary.example:6379" {
			t.Fatalf("open %d to %s, want 3 to the named address", n, p)
		}
	})
	t.Run("a closed connection is forgotten", func(t *testing.T) {
		g := New()
		d := &dials{to: []string{a, a}}
		dial := g.DialHook(d.next)
		c1, _ := dial(ctx, "tcp", "FailoverClient")
		c2, _ := dial(ctx, "tcp", "FailoverClient")
		c1.Close()
		c2.Close()
		if n, _ := g.Open(); n != 0 {
			t.Fatalf("%d connections tracked after both closed", n)
		}
	})
}

// holdDial is a dial hook that holds the first dial reaching old, once
// armed, until release is closed.
type holdDial struct {
	old              string
	armed            atomic.Bool
	reached, release chan struct{}
}

func (h *holdDial) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := next(ctx, network, addr)
		if err == nil && c.RemoteAddr().String() == h.old && h.armed.CompareAndSwap(true, false) {
			close(h.reached)
			<-h.release
		}
		return c, err
	}
}

func (h *holdDial) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (h *holdDial) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// A dial sent to the old primary before a SENTINEL FAILOVER and completed
// after go-redis's clean-up must not join the pool: without the guard it
// does, and the next commands run on the old primary while the rest of the
// client's connections (its pipeline pool) are on the new one (seen as
// CONFIG GET port answered by the old primary; the failover test saw
// commits on one and acks on the other).
func TestGuardFollowsASentinelFailover(t *testing.T) {
	s := redistest.NewSentinel(t, 1, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	old, err := s.PrimaryAddr()
	if err != nil {
		t.Fatal(err)
	}
	opts := &redis.FailoverOptions{MasterName: s.Name, SentinelAddrs: s.SentinelAddrs(), ContextTimeoutEnabled: true}
	guard := Install(opts)
	c := redis.NewFailoverClient(opts)
	defer c.Close()
	c.AddHook(guard)
	hold := &holdDial{old: old, reached: make(chan struct{}), release: make(chan struct{})}
	c.AddHook(hold)
	port := func() string {
		ps, err := c.ConfigGet(ctx, "port").Result()
		if err != nil {
			return ""
		}
		return ps["port"]
	}
	if p := port(); p == "" || !strings.HasSuffix(old, ":"+p) {
		t.Fatalf("the client answers from port %q, want the primary %s", p, old)
	}
	// Hold the pool's connection, so the next command dials; hold that
	// dial once it reached the old primary.
	busy := c.Conn()
	defer busy.Close()
	if err := busy.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	hold.armed.Store(true)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := c.Ping(ctx).Err(); err != nil {
			t.Errorf("the held command: %v", err)
		}
	}()
	<-hold.reached
	primary, err := s.Failover(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for p := port(); !strings.HasSuffix(primary, ":"+p); p = port() {
		if ctx.Err() != nil {
			t.Fatalf("the client never answered from the new primary %s (last: port %q)", primary, p)
		}
	}
	close(hold.release)
	wg.Wait()
	for i := range 10 {
		if p := port(); !strings.HasSuffix(primary, ":"+p) {
			t.Fatalf("command %d after the held dial completed answered from port %s, want the new primary %s (old %s)", i, p, primary, old)
		}
	}
}

// A client reading from replicas picks a replica per dial: no guard.
func TestInstallSkipsReplicaOnly(t *testing.T) {
	opts := &redis.FailoverOptions{MasterName: "m", SentinelAddrs: []string{"127.0.0.1:1"}, ReplicaOnly: true}
	if h := Install(opts); h != nil || opts.Dialer != nil {
		t.Fatalf("hook %v, dialer set %v; want neither", h, opts.Dialer != nil)
	}
}
