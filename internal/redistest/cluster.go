package redistest

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"reflect"
	"strconv"
	"strings"
	"time"
)

// Cluster is a Redis Cluster, each node a Server on a free loopback
// port, with every slot assigned: primaries only (StartCluster), or
// primaries with replicas that fail over (StartClusterReplicas).
type Cluster struct {
	// Nodes are every server, primaries and replicas. In a cluster from
	// StartCluster every node is a primary for good; with replicas,
	// which node is a primary changes with every failover, so ask
	// Primaries, PrimaryOf or ReplicaOf rather than an index.
	Nodes []*Server
	// ids are the nodes' cluster ids (CLUSTER MYID), ids[i] of Nodes[i].
	// A node keeps its id across Kill and Restart (it is in nodes.conf,
	// in the node's directory), so the topology a node reports can be
	// mapped back to a Server even after it rejoined.
	ids []string
}

// Addrs are the nodes' host:port, for a cluster client's seed list.
func (c *Cluster) Addrs() []string {
	out := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		out[i] = n.Addr
	}
	return out
}

// StartCluster starts masters cluster-enabled servers shaped by cfg, joins
// them with redis-cli --cluster create (no replicas), and returns once
// every node reports cluster_state:ok.
func StartCluster(ctx context.Context, masters int, cfg Config) (*Cluster, error) {
	return startCluster(ctx, masters, 0, cfg)
}

// StartClusterReplicas starts masters primaries with replicas replicas
// each (masters*(1+replicas) servers shaped by cfg; redis-cli needs at
// least 3 primaries), joins them with redis-cli --cluster create
// --cluster-replicas, and returns once every node reports
// cluster_state:ok and knows every node, every node names the same
// primary for every replica, and every replica's link to its primary is
// up. A primary killed (SIGKILL) is failed over by the cluster itself
// within a few seconds: see KillPrimary, Failover and Rejoin.
func StartClusterReplicas(ctx context.Context, masters, replicas int, cfg Config) (*Cluster, error) {
	if replicas < 1 {
		return nil, fmt.Errorf("redistest: StartClusterReplicas needs at least one replica per primary (StartCluster has none)")
	}
	return startCluster(ctx, masters, replicas, cfg)
}

func startCluster(ctx context.Context, masters, replicas int, cfg Config) (*Cluster, error) {
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		return nil, fmt.Errorf("redistest: redis-cli not found on PATH (it comes with redis-server: apt-get install redis-server): %w", err)
	}
	if cfg.TLS != nil {
		// redis-cli would need the certificates too; TLS is tested on a
		// single server.
		return nil, fmt.Errorf("redistest: StartCluster does not take a TLS config")
	}
	// The node timeout is how long a node may be silent before the others
	// count it failed. Without replicas nothing can fail over, and 5 s
	// stays: the tests that kill a master and restart it
	// (TestClusterMasterRestart) were written against it, and a shorter
	// one would make the other masters declare the cluster down for every
	// slot sooner during such an outage. With replicas the timeout is the
	// bulk of an automatic failover (the timeout, then a 0.5-1 s election
	// delay), so 2 s makes one take about 3 s; shorter would risk
	// failovers nobody asked for on a loaded 2-core machine, where a node
	// can be late to answer.
	timeout := "5000"
	var extra []string
	if replicas > 0 {
		timeout = "2000"
		// A primary delays a diskless full sync 5 s by default, to serve
		// several replicas with one transfer; here it only slows every
		// start and every rejoin.
		extra = []string{"--repl-diskless-sync-delay", "0"}
	}
	args := append([]string{"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
		"--cluster-node-timeout", timeout}, extra...)
	cfg.Args = append(args, cfg.Args...)
	c := &Cluster{}
	for range masters * (1 + replicas) {
		s, err := StartConfig(ctx, cfg)
		if err != nil {
			c.Close()
			return nil, err
		}
		c.Nodes = append(c.Nodes, s)
	}
	for _, n := range c.Nodes {
		id, err := n.Do("CLUSTER", "MYID")
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("redistest: cluster node %s: CLUSTER MYID: %w", n.Addr, err)
		}
		c.ids = append(c.ids, id)
	}
	args = append([]string{"--cluster", "create"}, c.Addrs()...)
	args = append(args, "--cluster-replicas", strconv.Itoa(replicas), "--cluster-yes")
	if out, err := exec.CommandContext(ctx, cli, args...).CombinedOutput(); err != nil {
		c.Close()
		return nil, fmt.Errorf("redistest: redis-cli --cluster create: %v: %s", err, out)
	}
	if err := c.WaitOK(ctx); err != nil {
		c.Close()
		return nil, err
	}
	if replicas > 0 {
		if _, err := c.until(ctx, "every primary's replicas to be in sync", func(t topology) (bool, error) {
			for id, e := range t {
				if e.primary {
					if len(t.replicasOf(id)) != replicas {
						return false, nil
					}
					continue
				}
				if !c.replicating(c.node(id), c.node(e.master)) {
					return false, nil
				}
			}
			return true, nil
		}); err != nil {
			c.Close()
			return nil, err
		}
	}
	return c, nil
}

// WaitOK waits until every node reports cluster_state:ok and knows every
// other node (after a start, or a node's Restart).
func (c *Cluster) WaitOK(ctx context.Context) error {
	deadline := time.Now().Add(30 * time.Second)
	for _, n := range c.Nodes {
		for {
			info, err := n.Do("CLUSTER", "INFO")
			if err == nil && strings.Contains(info, "cluster_state:ok") &&
				strings.Contains(info, fmt.Sprintf("cluster_known_nodes:%d", len(c.Nodes))) {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("redistest: cluster node %s not ok within 30s: %v %s", n.Addr, err, info)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	return nil
}

// Close stops every node.
func (c *Cluster) Close() {
	for _, n := range c.Nodes {
		n.Close()
	}
}

// MoveSlot migrates the hash slot holding key, with its keys, to node to
// (an index into Nodes, a primary), the way redis-cli --cluster reshard
// does: mark the slot importing and migrating, MIGRATE its keys in
// batches, then assign it on every primary (a replica refuses SETSLOT; it
// learns the new owner from its primary). Clients see ASK and MOVED
// redirects and TRYAGAIN while it runs. It returns the index of the node
// that held it.
func (c *Cluster) MoveSlot(ctx context.Context, key string, to int) (from int, err error) {
	slot, err := c.Nodes[0].Do("CLUSTER", "KEYSLOT", key)
	if err != nil {
		return 0, err
	}
	ids := make([]string, len(c.Nodes))
	from = -1
	for i, n := range c.Nodes {
		if ids[i], err = n.Do("CLUSTER", "MYID"); err != nil {
			return 0, err
		}
	}
	owner, err := c.Nodes[0].Do("CLUSTER", "NODES")
	if err != nil {
		return 0, err
	}
	s, _ := strconv.Atoi(slot)
	for _, line := range strings.Split(owner, "\n") {
		f := strings.Fields(line)
		for _, r := range f[min(len(f), 8):] {
			lo, hi, _ := strings.Cut(r, "-")
			l, err1 := strconv.Atoi(lo)
			h, err2 := strconv.Atoi(hi)
			if err2 != nil {
				h = l
			}
			if err1 == nil && l <= s && s <= h {
				for i := range ids {
					if ids[i] == f[0] {
						from = i
					}
				}
			}
		}
	}
	if from < 0 || from == to {
		return from, fmt.Errorf("redistest: slot %s of %q is on node %d; cannot move it to %d", slot, key, from, to)
	}
	view := parseNodes(owner)
	if !view[ids[to]].primary {
		return from, fmt.Errorf("redistest: node %d (%s) is a replica; a slot can only move to a primary", to, c.Nodes[to].Addr)
	}
	src, dst := c.Nodes[from], c.Nodes[to]
	if _, err := dst.Do("CLUSTER", "SETSLOT", slot, "IMPORTING", ids[from]); err != nil {
		return from, err
	}
	if _, err := src.Do("CLUSTER", "SETSLOT", slot, "MIGRATING", ids[to]); err != nil {
		return from, err
	}
	host, port, _ := strings.Cut(dst.Addr, ":")
	for {
		keys, err := src.Do("CLUSTER", "GETKEYSINSLOT", slot, "10")
		if err != nil {
			return from, err
		}
		if keys == "" {
			break
		}
		args := append([]string{"MIGRATE", host, port, "", "0", "5000", "KEYS"}, strings.Split(keys, "\n")...)
		if _, err := src.Do(args...); err != nil {
			return from, fmt.Errorf("redistest: migrate slot %s: %w", slot, err)
		}
		if ctx.Err() != nil {
			return from, ctx.Err()
		}
	}
	for _, n := range []*Server{dst, src} {
		if _, err := n.Do("CLUSTER", "SETSLOT", slot, "NODE", ids[to]); err != nil {
			return from, err
		}
	}
	for i, n := range c.Nodes {
		if i != from && i != to && view[ids[i]].primary {
			if _, err := n.Do("CLUSTER", "SETSLOT", slot, "NODE", ids[to]); err != nil {
				return from, err
			}
		}
	}
	return from, nil
}

// clusterWait bounds every wait for the cluster to agree: an automatic
// failover takes about 3 s (see startCluster), a rejoin a full sync of a
// test's little data; a minute is far beyond either on a loaded machine.
const clusterWait = 60 * time.Second

// Primaries returns the primaries serving slots now, in Nodes order, once
// every running node reports cluster_state:ok and they all agree on the
// topology (which node is a primary, and which replica follows which).
func (c *Cluster) Primaries() ([]*Server, error) {
	t, err := c.until(context.Background(), "the cluster to agree on its primaries", func(topology) (bool, error) { return true, nil })
	if err != nil {
		return nil, err
	}
	var out []*Server
	for i, id := range c.ids {
		if e := t[id]; e.primary && !e.failed && len(e.slots) > 0 && c.Nodes[i].running() {
			out = append(out, c.Nodes[i])
		}
	}
	return out, nil
}

// PrimaryOf returns the node serving key's hash slot now, once every
// running node reports cluster_state:ok and names that node the slot's
// owner: a client that asks any node is sent to it.
func (c *Cluster) PrimaryOf(key string) (*Server, error) {
	return c.primaryOf(context.Background(), key)
}

// ReplicaOf returns a replica of primary (the first in Nodes order) whose
// link to it is up and which primary counts as in sync, once the running
// nodes agree on the topology. It fails at once when primary is not a
// primary, or has no replica that is not failed (after KillPrimary, until
// Rejoin), rather than wait for one that is not coming.
func (c *Cluster) ReplicaOf(primary *Server) (*Server, error) {
	return c.replicaOf(context.Background(), primary)
}

// Failover asks a replica of the primary serving key's slot to take over
// (CLUSTER FAILOVER: a manual failover, coordinated with the primary, so
// no acknowledged write is lost and the old primary becomes a replica of
// the new one). It returns the new primary once every running node names
// it the slot's owner and the old primary replicates it with its link up.
// A promoted replica starts a new replication id (INFO replication
// master_replid), as in an automatic failover.
func (c *Cluster) Failover(ctx context.Context, key string) (*Server, error) {
	return c.failover(ctx, key, "CLUSTER", "FAILOVER")
}

// FailoverForce is Failover without the primary's agreement (CLUSTER
// FAILOVER FORCE): the replica is promoted at once, without waiting for
// the primary's last writes, while the primary goes on taking writes
// until it learns of the new one; those are lost when it follows it, as
// in a managed service's failover of a primary that did not answer in
// time.
func (c *Cluster) FailoverForce(ctx context.Context, key string) (*Server, error) {
	return c.failover(ctx, key, "CLUSTER", "FAILOVER", "FORCE")
}

// failover is Failover sending cmd to the replica.
func (c *Cluster) failover(ctx context.Context, key string, cmd ...string) (*Server, error) {
	slot, err := c.keyslot(key)
	if err != nil {
		return nil, err
	}
	old, err := c.primaryOf(ctx, key)
	if err != nil {
		return nil, err
	}
	rep, err := c.replicaOf(ctx, old)
	if err != nil {
		return nil, err
	}
	if _, err := rep.Do(cmd...); err != nil {
		return nil, fmt.Errorf("redistest: %s on %s: %w", strings.Join(cmd, " "), rep.Addr, err)
	}
	oldID, repID := c.idOf(old), c.idOf(rep)
	_, err = c.until(ctx, fmt.Sprintf("%s to take slot %d over from %s, which replicates it", rep.Addr, slot, old.Addr), func(t topology) (bool, error) {
		return t.owner(slot) == repID && t[oldID].master == repID && c.replicating(old, rep), nil
	})
	if err != nil {
		return nil, err
	}
	return rep, nil
}

// KillPrimary kills (SIGKILL) the primary serving key's slot and returns
// it with the replica the cluster promoted in its place (an automatic
// failover, about 3 s), once every running node reports cluster_state:ok,
// counts the killed node failed and names the new primary the slot's
// owner. Writes the replica had not received when the primary died are
// lost, as in production. The killed node comes back with Rejoin. It
// fails at once when the primary has no replica to promote.
func (c *Cluster) KillPrimary(ctx context.Context, key string) (killed, primary *Server, err error) {
	slot, err := c.keyslot(key)
	if err != nil {
		return nil, nil, err
	}
	old, err := c.primaryOf(ctx, key)
	if err != nil {
		return nil, nil, err
	}
	if _, err := c.replicaOf(ctx, old); err != nil {
		return nil, nil, fmt.Errorf("redistest: no replica to promote in place of %s: %w", old.Addr, err)
	}
	old.Kill()
	oldID := c.idOf(old)
	_, err = c.until(ctx, fmt.Sprintf("the cluster to promote a replica of the killed %s (slot %d)", old.Addr, slot), func(t topology) (bool, error) {
		primary = c.node(t.owner(slot))
		if primary == nil || primary == old || !t[oldID].failed {
			return false, nil
		}
		info, err := primary.Do("INFO", "replication")
		return err == nil && infoField(info, "role") == "master", nil
	})
	if err != nil {
		return old, nil, err
	}
	return old, primary, nil
}

// Rejoin restarts s, a node that was killed (KillPrimary, or Kill on a
// replica), and returns once it is back as a replica: every running node,
// s too, reports cluster_state:ok and names s a replica of the same
// primary, not failed; s's link to that primary is up and the primary
// counts it in sync (INFO replication connected_slaves), so whatever
// needs a replica per primary, such as a strict-mode engine, can go on.
// s keeps its cluster identity across the restart (nodes.conf is in its
// directory, which Kill keeps): a killed primary learns that its slots
// moved to a newer primary and follows it. Its data is not kept (without
// Config.Persist); the full sync from its primary brings it.
func (c *Cluster) Rejoin(ctx context.Context, s *Server) error {
	id := c.idOf(s)
	if id == "" {
		return fmt.Errorf("redistest: %s is not a node of this cluster", s.Addr)
	}
	if !s.running() {
		if err := s.Restart(ctx); err != nil {
			return err
		}
	}
	_, err := c.until(ctx, fmt.Sprintf("%s to rejoin as a replica", s.Addr), func(t topology) (bool, error) {
		e := t[id]
		return !e.primary && !e.failed && c.replicating(s, c.node(e.master)), nil
	})
	return err
}

func (c *Cluster) primaryOf(ctx context.Context, key string) (*Server, error) {
	slot, err := c.keyslot(key)
	if err != nil {
		return nil, err
	}
	var p *Server
	_, err = c.until(ctx, fmt.Sprintf("the cluster to agree on the primary of slot %d", slot), func(t topology) (bool, error) {
		p = c.node(t.owner(slot))
		return p != nil && p.running(), nil
	})
	return p, err
}

func (c *Cluster) replicaOf(ctx context.Context, primary *Server) (*Server, error) {
	id := c.idOf(primary)
	if id == "" {
		return nil, fmt.Errorf("redistest: %s is not a node of this cluster", primary.Addr)
	}
	var r *Server
	_, err := c.until(ctx, fmt.Sprintf("a replica of %s in sync", primary.Addr), func(t topology) (bool, error) {
		if e := t[id]; !e.primary || e.failed {
			return false, fmt.Errorf("redistest: %s is not a primary", primary.Addr)
		}
		found := false
		for i, rid := range c.ids {
			if e := t[rid]; e.primary || e.master != id || e.failed {
				continue
			}
			found = true
			if c.replicating(c.Nodes[i], primary) {
				r = c.Nodes[i]
				return true, nil
			}
		}
		if !found {
			return false, fmt.Errorf("redistest: primary %s has no replica", primary.Addr)
		}
		return false, nil
	})
	return r, err
}

// replicating reports whether r is a replica of p with its link up and p
// lists r as an online replica: both ends agree the replication runs.
func (c *Cluster) replicating(r, p *Server) bool {
	if r == nil || p == nil || !r.running() || !p.running() {
		return false
	}
	info, err := r.Do("INFO", "replication")
	if err != nil || infoField(info, "role") != "slave" || infoField(info, "master_link_status") != "up" ||
		infoField(info, "master_port") != strconv.Itoa(p.port) {
		return false
	}
	info, err = p.Do("INFO", "replication")
	return err == nil && infoField(info, "role") == "master" &&
		strings.Contains(info, fmt.Sprintf(",port=%d,state=online,", r.port))
}

// keyslot is CLUSTER KEYSLOT key, asked of the first running node.
func (c *Cluster) keyslot(key string) (int, error) {
	for _, n := range c.Nodes {
		if !n.running() {
			continue
		}
		out, err := n.Do("CLUSTER", "KEYSLOT", key)
		if err != nil {
			return 0, err
		}
		return strconv.Atoi(out)
	}
	return 0, errors.New("redistest: no cluster node is running")
}

// node is the Server whose cluster id is id, or nil.
func (c *Cluster) node(id string) *Server {
	for i, x := range c.ids {
		if x == id && id != "" {
			return c.Nodes[i]
		}
	}
	return nil
}

// idOf is s's cluster id, or "" when s is none of the nodes.
func (c *Cluster) idOf(s *Server) string {
	for i, n := range c.Nodes {
		if n == s && i < len(c.ids) {
			return c.ids[i]
		}
	}
	return ""
}

// until polls, every 50 ms for at most clusterWait (or until ctx ends),
// for a topology every running node agrees on (settled) that satisfies
// cond, and returns it. cond's error ends the wait at once.
func (c *Cluster) until(ctx context.Context, what string, cond func(topology) (bool, error)) (topology, error) {
	deadline := time.Now().Add(clusterWait)
	for {
		t, why := c.settled()
		if why == nil {
			ok, err := cond(t)
			if err != nil {
				return nil, err
			}
			if ok {
				return t, nil
			}
			why = errors.New("agreed, but not yet as waited for")
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("redistest: timed out after %v waiting for %s: %v", clusterWait, what, why)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("redistest: waiting for %s: %w", what, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// settled returns the topology when every running node reports
// cluster_state:ok, knows every node, and reports the same topology
// (CLUSTER NODES: roles, primaries, slots, failed flags); else why not.
// Killed nodes are not asked; the others must count them failed alike.
func (c *Cluster) settled() (topology, error) {
	var first topology
	var firstAddr string
	for _, n := range c.Nodes {
		if !n.running() {
			continue
		}
		info, err := n.Do("CLUSTER", "INFO")
		if err != nil {
			return nil, fmt.Errorf("%s: CLUSTER INFO: %w", n.Addr, err)
		}
		if st := infoField(info, "cluster_state"); st != "ok" {
			return nil, fmt.Errorf("%s: cluster_state:%s", n.Addr, st)
		}
		if k := infoField(info, "cluster_known_nodes"); k != strconv.Itoa(len(c.Nodes)) {
			return nil, fmt.Errorf("%s: cluster_known_nodes:%s, want %d", n.Addr, k, len(c.Nodes))
		}
		out, err := n.Do("CLUSTER", "NODES")
		if err != nil {
			return nil, fmt.Errorf("%s: CLUSTER NODES: %w", n.Addr, err)
		}
		t := parseNodes(out)
		if first == nil {
			first, firstAddr = t, n.Addr
		} else if !reflect.DeepEqual(first, t) {
			return nil, fmt.Errorf("%s and %s see different topologies", firstAddr, n.Addr)
		}
	}
	if first == nil {
		return nil, errors.New("no cluster node is running")
	}
	return first, nil
}

// topology is one node's view of the cluster (CLUSTER NODES), by node id,
// reduced to what every node should agree on.
type topology map[string]nodeEntry

// nodeEntry is one line of CLUSTER NODES.
type nodeEntry struct {
	primary bool
	// master is the id of the primary a replica follows; "" for a
	// primary.
	master string
	// failed is the fail or fail? (PFAIL) flag: the node has not answered
	// within the node timeout.
	failed bool
	// slots are the slot ranges a primary serves, lo and hi inclusive.
	slots [][2]int
}

// parseNodes parses CLUSTER NODES: "<id> <ip:port@cport> <flags> <master>
// <ping-sent> <pong-recv> <config-epoch> <link-state> <slot>...". Slots
// being imported or migrated ("[slot->-id]", listed by the node doing it
// only) are left out, so views taken during a MoveSlot compare equal.
func parseNodes(out string) topology {
	t := topology{}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 8 {
			continue
		}
		var e nodeEntry
		for _, fl := range strings.Split(f[2], ",") {
			switch fl {
			case "master":
				e.primary = true
			case "fail", "fail?":
				e.failed = true
			}
		}
		if !e.primary && f[3] != "-" {
			e.master = f[3]
		}
		for _, r := range f[8:] {
			lo, hi, isRange := strings.Cut(r, "-")
			l, err1 := strconv.Atoi(lo)
			h, err2 := strconv.Atoi(hi)
			if !isRange {
				h, err2 = l, nil
			}
			if err1 == nil && err2 == nil {
				e.slots = append(e.slots, [2]int{l, h})
			}
		}
		t[f[0]] = e
	}
	return t
}

// owner is the id of the primary, not failed, serving slot, or "".
func (t topology) owner(slot int) string {
	for id, e := range t {
		if !e.primary || e.failed {
			continue
		}
		for _, r := range e.slots {
			if r[0] <= slot && slot <= r[1] {
				return id
			}
		}
	}
	return ""
}

// replicasOf are the ids of the nodes that follow primary id, failed or
// not.
func (t topology) replicasOf(id string) []string {
	var out []string
	for rid, e := range t {
		if !e.primary && e.master == id {
			out = append(out, rid)
		}
	}
	return out
}

// infoField is the value of name in an INFO reply ("name:value" lines),
// or "".
func infoField(info, name string) string {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			return v
		}
	}
	return ""
}
