package redistest

import (
	"context"
	"fmt"
	"os/exec"
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
