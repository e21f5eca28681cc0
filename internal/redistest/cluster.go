package redistest

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// Cluster is a Redis Cluster of masters only, each a Server on a free
// loopback port, with every slot assigned.
type Cluster struct {
	Nodes []*Server
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
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		return nil, fmt.Errorf("redistest: redis-cli not found on PATH (it comes with redis-server: apt-get install redis-server): %w", err)
	}
	if cfg.TLS != nil {
		// redis-cli would need the certificates too; TLS is tested on a
		// single server.
		return nil, fmt.Errorf("redistest: StartCluster does not take a TLS config")
	}
	cfg.Args = append([]string{"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
		"--cluster-node-timeout", "5000"}, cfg.Args...)
	c := &Cluster{}
	for range masters {
		s, err := StartConfig(ctx, cfg)
		if err != nil {
			c.Close()
			return nil, err
		}
		c.Nodes = append(c.Nodes, s)
	}
	args := append([]string{"--cluster", "create"}, c.Addrs()...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.CommandContext(ctx, cli, args...).CombinedOutput(); err != nil {
		c.Close()
		return nil, fmt.Errorf("redistest: redis-cli --cluster create: %v: %s", err, out)
	}
	if err := c.WaitOK(ctx); err != nil {
		c.Close()
		return nil, err
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
// (an index into Nodes), the way redis-cli --cluster reshard does: mark
// the slot importing and migrating, MIGRATE its keys in batches, then
// assign it on every node. Clients see ASK and MOVED redirects and
// TRYAGAIN while it runs. It returns the index of the node that held it.
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
		if i != from && i != to {
			if _, err := n.Do("CLUSTER", "SETSLOT", slot, "NODE", ids[to]); err != nil {
				return from, err
			}
		}
	}
	return from, nil
}
