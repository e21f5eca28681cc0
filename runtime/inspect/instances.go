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
	LastSeen time.Time `json:"last_seen"`
}

// Instances lists the members of handler's member set
// (seqby:__members__:handler), the most recently seen first. A member
// stays listed until a live engine prunes it, so compare LastSeen with
// the engines' LeaseTTL to tell the live ones.
func (i *Inspector) Instances(ctx context.Context, handler string) ([]Instance, error) {
	zs, err := i.c.ZRangeByScoreWithScores(ctx, rdb.MembersKey(handler), &redis.ZRangeBy{Min: "-inf", Max: "+inf"}).Result()
	if err != nil {
		return nil, fmt.Errorf("read the instances of %s: %w", handler, err)
	}
	out := make([]Instance, 0, len(zs))
	for _, z := range zs {
		out = append(out, Instance{Owner: fmt.Sprint(z.Member), LastSeen: time.UnixMilli(int64(z.Score)).UTC()})
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
