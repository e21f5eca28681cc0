package inspect

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seqby/seqby/runtime/internal/rdb"
)

// Instance is an engine instance in a handler's member set: its OwnerID
// and its last announcement (engines announce every heartbeat and
// discovery cycle; one silent for a LeaseTTL is no longer live).
type Instance struct {
	Owner    string    `json:"owner"`
	LastSeen time.Time `json:"last_seen"` // on Redis's clock
	// Live: its heartbeats go on. Each heartbeat records how many of the
	// handler's partitions it owns (the field owned:<owner> of seqby:__control__:handler) with
	// a TTL of the engine's LeaseTTL; Live is false once that record has
	// expired (a crashed or stopped engine, listed until a live one
	// prunes the member set).
	Live bool `json:"live"`
}

// Instances lists the members of handler's member set
// (seqby:__members__:handler), the most recently seen first, each with
// whether its heartbeats go on (Live).
func (i *Inspector) Instances(ctx context.Context, handler string) ([]Instance, error) {
	zs, err := i.c.ZRangeByScoreWithScores(ctx, rdb.MembersKey(handler), &redis.ZRangeBy{Min: "-inf", Max: "+inf"}).Result()
	if err != nil {
		return nil, fmt.Errorf("read the instances of %s: %w", handler, err)
	}
	out := make([]Instance, 0, len(zs))
	owners := make([]string, 0, len(zs))
	for _, z := range zs {
		owner := fmt.Sprint(z.Member)
		out = append(out, Instance{Owner: owner, LastSeen: time.UnixMilli(int64(z.Score)).UTC()})
		owners = append(owners, owner)
	}
	live, err := rdb.OwnedRecorded(ctx, i.c, handler, owners)
	if err != nil {
		return nil, fmt.Errorf("read the heartbeats of %s's instances: %w", handler, err)
	}
	for j := range out {
		out[j].Live = live[out[j].Owner]
	}
	sort.Slice(out, func(a, b int) bool { return out[a].LastSeen.After(out[b].LastSeen) })
	return out, nil
}

// LastEntries returns the newest n entries of stream, newest first.
func (i *Inspector) LastEntries(ctx context.Context, stream string, n int) ([]Entry, error) {
	ms, err := i.c.XRevRangeN(ctx, stream, "+", "-", int64(n)).Result()
	if err != nil {
		return nil, fmt.Errorf("read the last entries of %s: %w", stream, err)
	}
	out := make([]Entry, len(ms))
	for j, m := range ms {
		f := make(map[string]string, len(m.Values))
		for k, v := range m.Values {
			f[k] = fmt.Sprint(v)
		}
		out[j] = Entry{Stream: stream, ID: m.ID, Fields: f}
	}
	return out, nil
}

// Fault is a fault an engine instance reports: a partition it released
// after permanent Redis errors (Kind "released", until Until), or one it
// found without an owner while it had work (Kind "unowned"), as the
// runtime's Status.Faults, with the instance's OwnerID.
type Fault = rdb.FaultReport

// Faults lists the faults the live engine instances report
// (the faults:<owner> fields of each handler's control hash, kept by their heartbeats), sorted by owner,
// handler and stream.
func (i *Inspector) Faults(ctx context.Context) ([]Fault, error) {
	fs, err := rdb.Faults(ctx, i.c)
	if err != nil {
		return nil, err
	}
	sort.Slice(fs, func(a, b int) bool {
		x, y := fs[a], fs[b]
		if x.Owner != y.Owner {
			return x.Owner < y.Owner
		}
		if x.Handler != y.Handler {
			return x.Handler < y.Handler
		}
		return x.Stream < y.Stream
	})
	return fs, nil
}
