package redistest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Sentinel is a replicated Redis with automatic failover: a primary, its
// replicas and the sentinels that watch them, each a redis-server process
// on a free loopback port (a sentinel is redis-server --sentinel, so no
// other package is needed).
type Sentinel struct {
	// Name is the primary's name at the sentinels (a failover client's
	// MasterName).
	Name string
	// Nodes are the data servers; Nodes[0] started as the primary.
	Nodes []*Server
	// Watchers are the sentinels.
	Watchers []*Server
	// proxies front every server of a StartSentinelProxied topology.
	proxies map[*Server]*Proxy
}

// SentinelName is the name under which StartSentinel's sentinels monitor
// the primary.
const SentinelName = "seqby"

// StartSentinel starts a primary with replicas replicas (each shaped by
// cfg) and sentinels sentinels watching it with a majority quorum, and
// returns once every replica is in sync and every sentinel knows every
// replica and every other sentinel. A primary unreachable for a second is failed over.
func StartSentinel(ctx context.Context, replicas, sentinels int, cfg Config) (*Sentinel, error) {
	return startSentinel(ctx, replicas, sentinels, cfg, false)
}

// StartSentinelProxied is StartSentinel with every server, data node and
// sentinel, behind a Proxy of its own that it announces as its address
// (replica-announce-port, sentinel announce-port), so that every
// connection to it, from clients, replicas and sentinels alike, goes
// through the proxy and the network can be partitioned
// (IsolatePrimary). Addresses the sentinels name are the proxies'; Node
// finds a server by either.
func StartSentinelProxied(ctx context.Context, replicas, sentinels int, cfg Config) (*Sentinel, error) {
	return startSentinel(ctx, replicas, sentinels, cfg, true)
}

func startSentinel(ctx context.Context, replicas, sentinels int, cfg Config, proxied bool) (*Sentinel, error) {
	if cfg.TLS != nil {
		return nil, errors.New("redistest: StartSentinel does not take a TLS config")
	}
	s := &Sentinel{Name: SentinelName}
	if proxied {
		s.proxies = map[*Server]*Proxy{}
	}
	fail := func(err error) (*Sentinel, error) {
		s.Close()
		return nil, err
	}
	// start starts one server, behind its proxy when proxied; the proxy's
	// port goes into its arguments so a restart announces it too.
	start := func(cfg Config) (*Server, error) {
		var p *Proxy
		if proxied {
			var err error
			if p, err = StartProxy(""); err != nil {
				return nil, err
			}
			_, port := splitAddr(p.Addr)
			if !cfg.sentinel {
				cfg.Args = append(append([]string(nil), cfg.Args...), "--replica-announce-ip", "127.0.0.1", "--replica-announce-port", port)
			}
		}
		srv, err := StartConfig(ctx, cfg)
		if err != nil {
			if p != nil {
				p.Close()
			}
			return nil, err
		}
		if p != nil {
			p.SetTarget(srv.Addr)
			s.proxies[srv] = p
		}
		return srv, nil
	}
	primary, err := start(cfg)
	if err != nil {
		return fail(err)
	}
	s.Nodes = append(s.Nodes, primary)
	host, port := splitAddr(s.AddrOf(primary))
	for range replicas {
		rc := cfg
		rc.Args = append(append([]string(nil), cfg.Args...), "--replicaof", host, port)
		r, err := start(rc)
		if err != nil {
			return fail(err)
		}
		s.Nodes = append(s.Nodes, r)
	}
	quorum := strconv.Itoa(sentinels/2 + 1)
	for range sentinels {
		w, err := start(Config{sentinel: true})
		if err != nil {
			return fail(err)
		}
		s.Watchers = append(s.Watchers, w)
		var announce [][]string
		if proxied {
			_, aport := splitAddr(s.AddrOf(w))
			announce = [][]string{
				{"SENTINEL", "CONFIG", "SET", "announce-ip", "127.0.0.1"},
				{"SENTINEL", "CONFIG", "SET", "announce-port", aport},
			}
		}
		for _, cmd := range append(announce, [][]string{
			{"SENTINEL", "MONITOR", s.Name, host, port, quorum},
			{"SENTINEL", "SET", s.Name, "down-after-milliseconds", "1000"},
			{"SENTINEL", "SET", s.Name, "failover-timeout", "10000"},
		}...) {
			if _, err := w.Do(cmd...); err != nil {
				return fail(fmt.Errorf("redistest: sentinel %s: %v: %w", w.Addr, cmd, err))
			}
		}
	}
	if err := s.wait(ctx, "every replica in sync", func() (bool, error) {
		info, err := primary.Do("INFO", "replication")
		return err == nil && strings.Count(info, "state=online") == replicas, nil
	}); err != nil {
		return fail(err)
	}
	if err := s.wait(ctx, "every sentinel to know every replica and sentinel", func() (bool, error) {
		for _, w := range s.Watchers {
			m, err := s.master(w)
			if err != nil {
				return false, nil
			}
			if m["num-slaves"] != strconv.Itoa(replicas) || m["num-other-sentinels"] != strconv.Itoa(sentinels-1) {
				return false, nil
			}
		}
		return true, nil
	}); err != nil {
		return fail(err)
	}
	return s, nil
}

// SentinelAddrs are the sentinels' host:port, for a failover client.
func (s *Sentinel) SentinelAddrs() []string {
	out := make([]string, len(s.Watchers))
	for i, w := range s.Watchers {
		out[i] = s.AddrOf(w)
	}
	return out
}

// AddrOf is the address under which the sentinels, replicas and clients
// know srv: its proxy's in a StartSentinelProxied topology, else its own.
func (s *Sentinel) AddrOf(srv *Server) string {
	if p := s.proxies[srv]; p != nil {
		return p.Addr
	}
	return srv.Addr
}

// PrimaryAddr is the primary's host:port as the first sentinel answers.
func (s *Sentinel) PrimaryAddr() (string, error) {
	out, err := s.Watchers[0].Do("SENTINEL", "GET-MASTER-ADDR-BY-NAME", s.Name)
	if err != nil {
		return "", err
	}
	host, port, ok := strings.Cut(out, "\n")
	if !ok {
		return "", fmt.Errorf("redistest: sentinel's primary address: %q", out)
	}
	return host + ":" + port, nil
}

// Node returns the data server listening on addr, or announced as addr
// (AddrOf), or nil.
func (s *Sentinel) Node(addr string) *Server {
	for _, n := range s.Nodes {
		if n.Addr == addr || s.AddrOf(n) == addr {
			return n
		}
	}
	return nil
}

// Failover asks the sentinels for a failover (SENTINEL FAILOVER: the
// primary is demoted while it runs) and returns the new primary once
// every sentinel names it and it says it is a primary.
func (s *Sentinel) Failover(ctx context.Context) (string, error) {
	old, err := s.PrimaryAddr()
	if err != nil {
		return "", err
	}
	if _, err := s.Watchers[0].Do("SENTINEL", "FAILOVER", s.Name); err != nil {
		return "", fmt.Errorf("redistest: SENTINEL FAILOVER: %w", err)
	}
	return s.awaitNewPrimary(ctx, old)
}

// KillPrimary kills the primary (SIGKILL) and returns the replica the
// sentinels promoted in its place. The killed server can be restarted
// with Restart; it then rejoins as a replica.
func (s *Sentinel) KillPrimary(ctx context.Context) (killed *Server, primary string, err error) {
	old, err := s.PrimaryAddr()
	if err != nil {
		return nil, "", err
	}
	killed = s.Node(old)
	if killed == nil {
		return nil, "", fmt.Errorf("redistest: the primary %s is none of the nodes", old)
	}
	killed.Kill()
	primary, err = s.awaitNewPrimary(ctx, old)
	return killed, primary, err
}

// IsolatePrimary partitions the network in two, as a failed switch
// might: on one side the primary and the clients that dial from source
// (SourceDialer), on the other the replicas, the sentinels and every
// other client. The primary's own connections out are not cut (a primary
// makes none). It returns once the sentinels promoted a replica, with the
// isolated server, still a primary on its side taking its clients'
// writes, and the new primary's address. Heal ends the partition; the
// sentinels then make the isolated server a replica of the new primary,
// and what it took meanwhile is gone. Only a StartSentinelProxied
// topology can be partitioned.
func (s *Sentinel) IsolatePrimary(ctx context.Context, source string) (isolated *Server, primary string, err error) {
	if s.proxies == nil {
		return nil, "", errors.New("redistest: IsolatePrimary needs a topology from StartSentinelProxied")
	}
	old, err := s.PrimaryAddr()
	if err != nil {
		return nil, "", err
	}
	isolated = s.Node(old)
	if isolated == nil {
		return nil, "", fmt.Errorf("redistest: the primary %s is none of the nodes", old)
	}
	for srv, p := range s.proxies {
		if srv == isolated {
			p.Only(source)
		} else {
			p.Cut(source)
		}
	}
	primary, err = s.awaitNewPrimary(ctx, old)
	return isolated, primary, err
}

// Heal ends a partition, so every client may reach every server again,
// and returns once every data server but the primary is a replica with
// its link to the primary up: the sentinels have made the isolated
// server one, and it has resynchronised.
func (s *Sentinel) Heal(ctx context.Context) error {
	for _, p := range s.proxies {
		p.Heal()
	}
	return s.wait(ctx, "every server but the primary to replicate it", func() (bool, error) {
		primary, err := s.PrimaryAddr()
		if err != nil {
			return false, nil
		}
		for _, n := range s.Nodes {
			if s.AddrOf(n) == primary {
				continue
			}
			info, err := n.Do("INFO", "replication")
			if err != nil || !strings.Contains(info, "role:slave") || !strings.Contains(info, "master_link_status:up") {
				return false, nil
			}
		}
		return true, nil
	})
}

// awaitNewPrimary waits until every sentinel names a primary other than
// old and that server reports role:master.
func (s *Sentinel) awaitNewPrimary(ctx context.Context, old string) (string, error) {
	var now string
	err := s.wait(ctx, "the sentinels to agree on a new primary", func() (bool, error) {
		now = ""
		for _, w := range s.Watchers {
			out, err := w.Do("SENTINEL", "GET-MASTER-ADDR-BY-NAME", s.Name)
			if err != nil {
				return false, nil
			}
			addr := strings.Replace(out, "\n", ":", 1)
			if addr == old || (now != "" && addr != now) {
				return false, nil
			}
			now = addr
		}
		n := s.Node(now)
		if n == nil {
			return false, nil
		}
		info, err := n.Do("INFO", "replication")
		return err == nil && strings.Contains(info, "role:master"), nil
	})
	return now, err
}

// master is SENTINEL MASTER's field list as a map.
func (s *Sentinel) master(w *Server) (map[string]string, error) {
	out, err := w.Do("SENTINEL", "MASTER", s.Name)
	if err != nil {
		return nil, err
	}
	f := strings.Split(out, "\n")
	m := make(map[string]string, len(f)/2)
	for i := 0; i+1 < len(f); i += 2 {
		m[f[i]] = f[i+1]
	}
	return m, nil
}

// wait polls cond every 20 ms for at most 60 s (or until ctx ends).
func (s *Sentinel) wait(ctx context.Context, what string, cond func() (bool, error)) error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		ok, err := cond()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redistest: timed out waiting for %s", what)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("redistest: waiting for %s: %w", what, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Close stops every server and sentinel and removes their directories.
func (s *Sentinel) Close() {
	for _, w := range s.Watchers {
		w.Close()
	}
	for _, n := range s.Nodes {
		n.Close()
	}
	for _, p := range s.proxies {
		p.Close()
	}
}

func splitAddr(addr string) (host, port string) {
	i := strings.LastIndexByte(addr, ':')
	return addr[:i], addr[i+1:]
}
