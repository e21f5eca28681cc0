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
	// HeadID is the id of the lane's head: its oldest entry the group
	// has not acked (the first pending one, else the first not
	// delivered); "" when nothing waits.
	HeadID string
}

// statsBatch bounds the commands of one pipeline.
const statsBatch = 500

// LanesStats describes each of streams for group, in pipelines of
// statsBatch streams (XINFO STREAM and XINFO GROUPS each, then one
// command more for each lane where something waits, to find its head:
// XPENDING's summary or an XRANGE of one entry). A stream that
// does not exist is Exists false; any other error reply fails the call.
// When Redis cannot tell a group's lag (XINFO GROUPS reports none after
// entries were deleted from the middle of the stream), the entries after
// the group's last delivered id are counted instead.
func LanesStats(ctx context.Context, c redis.UniversalClient, group string, streams []string) ([]LaneStats, error) {
	out := make([]LaneStats, len(streams))
	heads := make([]string, len(streams)) // last delivered ids, where the head follows one
	names := make([]string, len(streams)) // group's name on each lane (GroupOf)
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
			delivered := ""
			if g, ok := GroupOf(gs, group); ok {
				l.Group, l.Pending, l.Lag, delivered, names[lo+i] = true, g.Pending, g.Lag, g.LastDeliveredID, g.Name
				if g.Lag < 0 {
					if l.Lag, err = countAfter(ctx, c, s, g.LastDeliveredID); err != nil {
						return nil, err
					}
				}
			}
			if !l.Group && l.Lag > 0 {
				l.HeadID = info.FirstEntry.ID
			} else if l.Pending == 0 && l.Lag > 0 {
				heads[lo+i] = delivered
			}
		}
		if err := readHeads(ctx, c, names[lo:hi], out[lo:hi], heads[lo:hi]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// readHeads fills in the HeadID of the lanes where entries wait behind
// the group's cursor, in one pipeline: the first pending entry where
// some are pending (in groups[i], the group's name on lane i), else the
// first entry after delivered[i] (the group's last delivered id) where it
// is not "".
func readHeads(ctx context.Context, c redis.UniversalClient, groups []string, lanes []LaneStats, delivered []string) error {
	pending := make([]*redis.XPendingCmd, len(lanes))
	next := make([]*redis.XMessageSliceCmd, len(lanes))
	ask := false
	_, _ = c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, l := range lanes {
			switch {
			case l.Pending > 0:
				pending[i], ask = p.XPending(ctx, l.Stream, groups[i]), true
			case delivered[i] != "":
				next[i], ask = p.XRangeN(ctx, l.Stream, "("+delivered[i], "+", 1), true
			}
		}
		return nil
	})
	if !ask {
		return nil
	}
	for i := range lanes {
		l := &lanes[i]
		switch {
		case pending[i] != nil:
			p, err := pending[i].Result()
			// NOGROUP: the lane or its group went between the two
			// pipelines; nothing waits there now.
			if err != nil && !errors.Is(err, redis.Nil) && !strings.HasPrefix(err.Error(), "NOGROUP") {
				return fmt.Errorf("XPENDING %s: %w", l.Stream, err)
			}
			if p != nil && p.Count > 0 {
				l.HeadID = p.Lower
			}
		case next[i] != nil:
			msgs, err := next[i].Result()
			if err != nil {
				return fmt.Errorf("read the head of %s: %w", l.Stream, err)
			}
			if len(msgs) > 0 {
				l.HeadID = msgs[0].ID
			}
		}
	}
	return nil
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
