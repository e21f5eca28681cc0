package rdb

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// BarrierKey is the prefix of the keys a replica barrier writes: a write
// is what makes WAIT count from the barrier (WAIT waits for the
// connection's last write), and replication is one ordered stream, so
// replicas that have it have every write the primary made before it.
// Each barrier writes fresh keys, "seqby:__barrier__:{tag}:<nonce>"
// (SlotBarrierKey), deleted after its WAIT and expiring barrierTTL after,
// if the delete is lost.
const BarrierKey = "seqby:__barrier__"

// barrierTTL is how long a barrier key outlives a lost delete.
const barrierTTL = time.Minute

// ErrNotPrimary is a barrier's or a check's answer from a server that is
// not a primary.
var ErrNotPrimary = errors.New("the server is not a primary")

// Barrier writes a fresh barrier key, waits up to timeout for n replicas to
// acknowledge it (WAIT) and reads the primary's replication id, all on one
// connection: acks is how many replicas have every write the primary made
// before the barrier, and replid names that primary (a replica promoted by
// a failover starts a new one). A server that is not a primary refuses the
// write (READONLY).
func Barrier(ctx context.Context, c redis.UniversalClient, n int, timeout time.Duration) (acks int, replid string, err error) {
	acks, replid, refused, err := barrier(ctx, c, []string{SlotBarrierKey(0) + ":" + newNonce()}, n, timeout)
	if err == nil && refused[0] != nil {
		err = refused[0]
	}
	return acks, replid, err
}

// BarrierSlots is Barrier on one primary of a Redis Cluster for the hash
// slots it serves: one write of SlotBarrierKey per slot, then WAIT and
// INFO, on one connection to node. refused[i] is the error of slots[i]'s
// write (MOVED, ASK, CLUSTERDOWN: the node does not serve the slot now),
// nil where it ran on node; only those slots are confirmed by acks.
//
// Each write is of a fresh key (SlotBarrierKey and a random nonce),
// deleted after the WAIT: while a slot migrates, its old node still runs
// writes to keys it holds, and one barrier key kept there would be
// confirmed on the old node's replicas while the partition's writes went
// (ASK) to the new node; a key that exists nowhere is refused (ASK) by
// the old node.
func BarrierSlots(ctx context.Context, node *redis.Client, slots []int, n int, timeout time.Duration) (acks int, replid string, refused []error, err error) {
	nonce := newNonce()
	keys := make([]string, len(slots))
	for i, s := range slots {
		keys[i] = SlotBarrierKey(s) + ":" + nonce
	}
	return barrier(ctx, node, keys, n, timeout)
}

// newNonce is a barrier key's random suffix, so no two barriers share a
// key (one left on an old node by a migrating slot is never confirmed).
func newNonce() string {
	b := make([]byte, 8)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// barrier writes keys, then WAITs and reads INFO replication, in one
// pipeline (one connection): a write refused does not stop the others.
// The keys are deleted after (they expire anyway).
func barrier(ctx context.Context, c redis.UniversalClient, keys []string, n int, timeout time.Duration) (int, string, []error, error) {
	var wait *redis.Cmd
	var info *redis.StringCmd
	sets := make([]*redis.StatusCmd, len(keys))
	// Each command's error is read on its own below: a write the node
	// refuses (it does not serve that slot) leaves the others standing.
	_, _ = c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, k := range keys {
			sets[i] = p.Set(ctx, k, "1", barrierTTL)
		}
		// (Pipeliner has no Wait method.)
		wait = p.Do(ctx, "WAIT", n, timeout.Milliseconds())
		info = p.Info(ctx, "replication")
		for _, k := range keys {
			p.Del(ctx, k)
		}
		return nil
	})
	if info.Err() != nil {
		return 0, "", nil, fmt.Errorf("INFO replication: %w", info.Err())
	}
	r := parseReplication(info.Val())
	if r.Role != "master" {
		return 0, "", nil, fmt.Errorf("replica barrier answered by a %s: %w", r.Role, ErrNotPrimary)
	}
	got, werr := wait.Int()
	if werr != nil {
		return 0, "", nil, fmt.Errorf("WAIT: %w", werr)
	}
	refused := make([]error, len(keys))
	for i, s := range sets {
		refused[i] = s.Err()
	}
	return got, r.ReplID, refused, nil
}

// SlotBarrierKey is the prefix of the keys a barrier writes in hash slot
// s of a Redis Cluster, "seqby:__barrier__:{tag}" with a tag that hashes
// to s; BarrierSlots adds ":<nonce>" and deletes the key after its WAIT
// (it expires a minute after, if the delete is lost).
func SlotBarrierKey(s int) string { return taggedBarrierKey(slotTags()[s]) }

// taggedBarrierKey is the barrier key with hash tag tag.
func taggedBarrierKey(tag string) string { return BarrierKey + ":{" + tag + "}" }

// slotTags holds, for each hash slot, the shortest decimal number (in
// order of trial) that hashes to it.
var slotTags = sync.OnceValue(func() []string {
	tags := make([]string, slotCount)
	left := slotCount
	for i := 0; left > 0; i++ {
		t := strconv.Itoa(i)
		if s := slot(t); tags[s] == "" {
			tags[s] = t
			left--
		}
	}
	return tags
})

// Slot is the Redis Cluster hash slot of key (its hash tag's, when it has
// one).
func Slot(key string) int { return slot(key) }

// NodeSlots reads, from one node of a Redis Cluster, its replication
// (INFO replication) and the hash slots it says it serves (CLUSTER NODES'
// "myself" line), in one round trip: a primary's replication id with the
// slots it held when it answered.
func NodeSlots(ctx context.Context, node *redis.Client) (Replication, []int, error) {
	var info, nodes *redis.StringCmd
	if _, err := node.Pipelined(ctx, func(p redis.Pipeliner) error {
		info = p.Info(ctx, "replication")
		nodes = p.ClusterNodes(ctx)
		return nil
	}); err != nil {
		return Replication{}, nil, fmt.Errorf("INFO replication, CLUSTER NODES: %w", err)
	}
	r := parseReplication(info.Val())
	for _, line := range strings.Split(nodes.Val(), "\n") {
		f := strings.Fields(line)
		if len(f) < 8 || !slices.Contains(strings.Split(f[2], ","), "myself") {
			continue
		}
		var slots []int
		for _, rng := range f[8:] {
			if strings.HasPrefix(rng, "[") {
				continue // a slot being migrated or imported
			}
			lo, hi, isRange := strings.Cut(rng, "-")
			l, err := strconv.Atoi(lo)
			h := l
			if isRange {
				h, err = strconv.Atoi(hi)
			}
			if err != nil || l < 0 || h >= slotCount {
				return r, nil, fmt.Errorf("CLUSTER NODES: unreadable slots %q", rng)
			}
			for s := l; s <= h; s++ {
				slots = append(slots, s)
			}
		}
		return r, slots, nil
	}
	return r, nil, fmt.Errorf("CLUSTER NODES: no line for the node itself")
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
