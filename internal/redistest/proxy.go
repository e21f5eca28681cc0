package redistest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"time"
)

// Proxy forwards TCP connections to a server and can cut clients off it
// by their source address: a network partition between those clients and
// the server, made without root or a firewall. A client to be cut off
// dials from a loopback address of its own (a Dialer from SourceDialer);
// everything else dials from 127.0.0.1.
//
// A cut client's connections are closed and its new ones are closed as
// soon as they are accepted, so it sees a reset rather than a silence:
// it notices the partition at once instead of after its read timeout.
type Proxy struct {
	// Addr is the proxy's host:port, where clients dial.
	Addr string

	ln     net.Listener
	mu     sync.Mutex
	target string
	cut    func(source string) bool // nil: nobody is cut
	links  map[*link]struct{}
	wg     sync.WaitGroup
}

// link is one forwarded connection.
type link struct {
	source           string
	client, upstream net.Conn
}

// Partitioned is the source address of a client that is to be cut off in
// a test's partition (Proxy.Cut, Sentinel.IsolatePrimary).
const Partitioned = "127.0.0.2"

// ErrNoPartition means the platform routes only 127.0.0.1 to the loopback
// interface (Linux routes all of 127/8), so clients cannot be told apart
// by source address and a partition cannot be made; tests that need one
// skip.
var ErrNoPartition = errors.New("redistest: cannot dial from " + Partitioned + " on this platform, so no client can be partitioned")

// CanPartition returns ErrNoPartition (wrapped) unless a client can dial
// the loopback interface from Partitioned.
func CanPartition() error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	defer ln.Close()
	c, err := SourceDialer(Partitioned)(context.Background(), "tcp", ln.Addr().String())
	if err != nil {
		return fmt.Errorf("%w: %w", ErrNoPartition, err)
	}
	return c.Close()
}

// SourceDialer returns a dial function (a go-redis Options.Dialer) whose
// connections come from source, so a Proxy can tell them apart.
func SourceDialer(source string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	d := &net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(source)}}
	return d.DialContext
}

// StartProxy listens on a free loopback port and forwards every
// connection to target (host:port); target may be empty and set later
// with SetTarget, before the first client dials.
func StartProxy(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("redistest: proxy: %w", err)
	}
	p := &Proxy{Addr: ln.Addr().String(), ln: ln, target: target, links: map[*link]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// SetTarget points new connections at target.
func (p *Proxy) SetTarget(target string) {
	p.mu.Lock()
	p.target = target
	p.mu.Unlock()
}

// Cut cuts the clients dialing from any of sources off the server until
// Heal.
func (p *Proxy) Cut(sources ...string) {
	p.setCut(func(s string) bool { return slices.Contains(sources, s) })
}

// Only cuts every client off the server except those dialing from one of
// sources, until Heal.
func (p *Proxy) Only(sources ...string) {
	p.setCut(func(s string) bool { return !slices.Contains(sources, s) })
}

// Heal ends a Cut or Only: every client may connect again.
func (p *Proxy) Heal() { p.setCut(nil) }

func (p *Proxy) setCut(cut func(string) bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = cut
	for l := range p.links {
		if cut != nil && cut(l.source) {
			l.client.Close()
			l.upstream.Close()
			delete(p.links, l)
		}
	}
}

// Close stops listening and closes every forwarded connection.
func (p *Proxy) Close() {
	p.ln.Close()
	p.mu.Lock()
	for l := range p.links {
		l.client.Close()
		l.upstream.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		p.wg.Add(1)
		go p.forward(c)
	}
}

// forward connects c to the target unless its source is cut, and copies
// both ways until either side closes.
func (p *Proxy) forward(c net.Conn) {
	defer p.wg.Done()
	source, _, _ := net.SplitHostPort(c.RemoteAddr().String())
	p.mu.Lock()
	target, cut := p.target, p.cut
	p.mu.Unlock()
	if target == "" || (cut != nil && cut(source)) {
		c.Close()
		return
	}
	up, err := net.DialTimeout("tcp", target, 5*time.Second)
	if err != nil {
		c.Close()
		return
	}
	l := &link{source: source, client: c, upstream: up}
	p.mu.Lock()
	// Cut between the check above and now: drop it here.
	if p.cut != nil && p.cut(source) {
		p.mu.Unlock()
		c.Close()
		up.Close()
		return
	}
	p.links[l] = struct{}{}
	p.mu.Unlock()
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		io.Copy(dst, src)
		dst.Close()
		src.Close()
		done <- struct{}{}
	}
	go pipe(up, c)
	go pipe(c, up)
	<-done
	<-done
	p.mu.Lock()
	delete(p.links, l)
	p.mu.Unlock()
}
