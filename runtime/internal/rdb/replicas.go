package rdb

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// BarrierKey is the key a replica barrier writes: a write is what makes
// WAIT count from the barrier (WAIT waits for the connection's last
// write), and replication is one ordered stream, so replicas that have it
// have every write the primary made before it. It expires a minute after
// the last barrier.
const BarrierKey = "seqby:__barrier__"

// barrierTTL is BarrierKey's lifetime after the last barrier.
const barrierTTL = time.Minute

// ErrNotPrimary is a barrier's or a check's answer from a server that is
// not a primary.
var ErrNotPrimary = errors.New("the server is not a primary")

// Barrier writes BarrierKey, waits up to timeout for n replicas to
// acknowledge it (WAIT) and reads the primary's replication id, all on one
// connection: acks is how many replicas have every write the primary made
// before the barrier, and replid names that primary (a replica promoted by
// a failover starts a new one). A server that is not a primary refuses the
// write (READONLY).
func Barrier(ctx context.Context, c redis.UniversalClient, n int, timeout time.Duration) (acks int, replid string, err error) {
	var wait *redis.Cmd
	var info *redis.StringCmd
	_, err = c.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, BarrierKey, "1", barrierTTL)
		// (Pipeliner has no Wait method.)
		wait = p.Do(ctx, "WAIT", n, timeout.Milliseconds())
		info = p.Info(ctx, "replication")
		return nil
	})
	if err != nil {
		return 0, "", err
	}
	r := parseReplication(info.Val())
	if r.Role != "master" {
		return 0, "", fmt.Errorf("replica barrier answered by a %s: %w", r.Role, ErrNotPrimary)
	}
	got, err := wait.Int()
	if err != nil {
		return 0, "", fmt.Errorf("WAIT: %w", err)
	}
	return got, r.ReplID, nil
}

// Replication is what a primary says of its replication and of the
// settings that bound a split brain.
type Replication struct {
	// Role is "master" or "slave".
	Role string
	// ReplID is the replication id (INFO's master_replid).
	ReplID string
	// Replicas is how many replicas are connected.
	Replicas int
	// MinReplicasToWrite and MinReplicasMaxLag are the server's
	// min-replicas-to-write and min-replicas-max-lag (seconds); Unchecked
	// is why they could not be read (CONFIG refused), else nil.
	MinReplicasToWrite int
	MinReplicasMaxLag  int
	Unchecked          error
}

// ReadReplication reads INFO replication and, where CONFIG is allowed,
// the min-replicas settings from the server c sends commands to (a
// failover client's primary).
func ReadReplication(ctx context.Context, c redis.UniversalClient) (Replication, error) {
	info, err := c.Info(ctx, "replication").Result()
	if err != nil {
		return Replication{}, fmt.Errorf("INFO replication: %w", err)
	}
	r := parseReplication(info)
	cfg, err := c.ConfigGet(ctx, "min-replicas-*").Result()
	if err != nil {
		if ctx.Err() != nil {
			return r, ctx.Err()
		}
		r.Unchecked = fmt.Errorf("CONFIG GET min-replicas-*: %w", err)
		return r, nil
	}
	r.MinReplicasToWrite, _ = strconv.Atoi(cfg["min-replicas-to-write"])
	r.MinReplicasMaxLag, _ = strconv.Atoi(cfg["min-replicas-max-lag"])
	return r, nil
}

// parseReplication reads INFO replication's role, master_replid and
// connected_slaves.
func parseReplication(info string) Replication {
	var r Replication
	for _, line := range strings.Split(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		switch k {
		case "role":
			r.Role = v
		case "master_replid":
			r.ReplID = v
		case "connected_slaves":
			r.Replicas, _ = strconv.Atoi(v)
		}
	}
	return r
}
