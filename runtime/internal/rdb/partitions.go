package rdb

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

// LaneStats is one stream as a consumer group sees it, for an operator's
// overview of many partitions.
type LaneStats struct {
	Stream string
	Exists bool
	Length int64
	// LastID is the id of the newest entry ever appended (XINFO STREAM
	// last-generated-id: it survives trimming), "0-0" when none.
	LastID string
	// Group reports whether the group exists on the stream; without it,
	// Pending is 0 and Lag the stream's length.
	Group   bool
	Pending int64 // entries delivered to the group and not acked
	Lag     int64 // entries not yet delivered to the group
}

// statsBatch bounds the commands of one pipeline.
const statsBatch = 500

// LanesStats describes each of streams for group, in pipelines of
// statsBatch streams (XINFO STREAM and XINFO GROUPS each). A stream that
// does not exist is Exists false; any other error reply fails the call.
// When Redis cannot tell a group's lag (XINFO GROUPS reports none after
// entries were deleted from the middle of the stream), the entries after
// the group's last delivered id are counted instead.
func LanesStats(ctx context.Context, c redis.UniversalClient, group string, streams []string) ([]LaneStats, error) {
	out := make([]LaneStats, len(streams))
	for lo := 0; lo < len(streams); lo += statsBatch {
		hi := min(lo+statsBatch, len(streams))
		infos := make([]*redis.XInfoStreamCmd, hi-lo)
		groups := make([]*redis.XInfoGroupsCmd, hi-lo)
		// Errors are read per command below: a missing stream is one.
		_, _ = c.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, s := range streams[lo:hi] {
				infos[i], groups[i] = p.XInfoStream(ctx, s), p.XInfoGroups(ctx, s)
			}
			return nil
		})
		for i, s := range streams[lo:hi] {
			l := &out[lo+i]
			l.Stream = s
			info, err := infos[i].Result()
			if noSuchKey(err) {
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("XINFO STREAM %s: %w", s, err)
			}
			l.Exists, l.Length, l.LastID, l.Lag = true, info.Length, info.LastGeneratedID, info.Length
			gs, err := groups[i].Result()
			if err != nil && !noSuchKey(err) {
				return nil, fmt.Errorf("XINFO GROUPS %s: %w", s, err)
			}
			for _, g := range gs {
				if g.Name != group {
					continue
				}
				l.Group, l.Pending, l.Lag = true, g.Pending, g.Lag
				if g.Lag < 0 {
					if l.Lag, err = countAfter(ctx, c, s, g.LastDeliveredID); err != nil {
						return nil, err
					}
				}
			}
		}
	}
	return out, nil
}

// countAfter counts the entries of stream after id, a page at a time.
func countAfter(ctx context.Context, c redis.UniversalClient, stream, id string) (int64, error) {
	var n int64
	for {
		msgs, err := c.XRangeN(ctx, stream, "("+id, "+", 1000).Result()
		if err != nil {
			return 0, fmt.Errorf("count the undelivered entries of %s: %w", stream, err)
		}
		n += int64(len(msgs))
		if len(msgs) < 1000 {
			return n, nil
		}
		id = msgs[len(msgs)-1].ID
	}
}

// noSuchKey reports XINFO's error for a missing stream.
func noSuchKey(err error) bool { return err != nil && strings.Contains(err.Error(), "no such key") }

// Strings reads keys (strings, such as leases) in pipelines, "" for a
// missing key.
func Strings(ctx context.Context, c redis.UniversalClient, keys []string) ([]string, error) {
	out := make([]string, len(keys))
	for lo := 0; lo < len(keys); lo += statsBatch {
		hi := min(lo+statsBatch, len(keys))
		cmds := make([]*redis.StringCmd, hi-lo)
		_, _ = c.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, k := range keys[lo:hi] {
				cmds[i] = p.Get(ctx, k)
			}
			return nil
		})
		for i, cmd := range cmds {
			v, err := cmd.Result()
			if errors.Is(err, redis.Nil) {
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("GET %s: %w", keys[lo+i], err)
			}
			out[lo+i] = v
		}
	}
	return out, nil
}

// IsPartition reports whether key is in category's index or being reaped
// (the keys Partitions returns), without reading the whole index.
func IsPartition(ctx context.Context, c redis.UniversalClient, category, key string) (bool, error) {
	in, err := c.SIsMember(ctx, IndexKey(category), key).Result()
	if err != nil || in {
		return in, err
	}
	return c.SIsMember(ctx, ReapingKey(category), key).Result()
}
