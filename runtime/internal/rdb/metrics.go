package rdb

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// HaltCounts returns, per handler, how many halt records its index
// (MarksKey) lists that exist: the halted partitions across every
// instance. The index may hold a member whose record is gone (a halt
// written by a stale owner is refused after the index step; a resolve
// does not fail on a lost unindex; a paused partition's), so each
// member's record is checked: one pipelined SMEMBERS per handler, then
// one HMGET per member (a few: halts and pauses are rare), each key its
// own slot.
func HaltCounts(ctx context.Context, c redis.UniversalClient, handlers []string) ([]int64, error) {
	if len(handlers) == 0 {
		return nil, nil
	}
	pipe := c.Pipeline()
	sets := make([]*redis.StringSliceCmd, len(handlers))
	for i, h := range handlers {
		sets[i] = pipe.SMembers(ctx, MarksKey(h))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("list the halted partitions: %w", err)
	}
	out := make([]int64, len(handlers))
	exists := make([][]*redis.SliceCmd, len(handlers))
	pipe = c.Pipeline()
	for i, cmd := range sets {
		for _, key := range cmd.Val() {
			exists[i] = append(exists[i], pipe.HMGet(ctx, key, MetaHalt))
		}
	}
	if pipe.Len() == 0 {
		return out, nil
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("check the halt records: %w", err)
	}
	for i, cmds := range exists {
		for _, cmd := range cmds {
			if v := cmd.Val(); len(v) == 1 && v[0] != nil {
				out[i]++
			}
		}
	}
	return out, nil
}

// Backlog returns, per stream, how many of its entries group has not
// handled yet: those pending (read, not acked) plus those not yet
// delivered (the group's lag, from XINFO GROUPS); 0 for a stream that
// does not exist (a backfill lane never written). ok[i] is false when
// Redis does not know stream i's lag (it cannot after some deletions) or
// the group does not exist on it. One pipelined XINFO GROUPS per stream;
// read only.
func Backlog(ctx context.Context, c redis.UniversalClient, group string, streams []string) (n []int64, ok []bool, err error) {
	n, ok = make([]int64, len(streams)), make([]bool, len(streams))
	if len(streams) == 0 {
		return n, ok, nil
	}
	pipe := c.Pipeline()
	cmds := make([]*redis.XInfoGroupsCmd, len(streams))
	for i, s := range streams {
		cmds[i] = pipe.XInfoGroups(ctx, s)
	}
	if _, err := pipe.Exec(ctx); err != nil && !isNoStream(err) {
		return n, ok, fmt.Errorf("read the groups' backlog: %w", err)
	}
	for i, cmd := range cmds {
		gs, err := cmd.Result()
		if isNoStream(err) {
			ok[i] = true
			continue
		}
		if err != nil {
			continue
		}
		// Lag is -1 when Redis cannot count it (go-redis maps nil).
		if g, mine := GroupOf(gs, group); mine && g.Lag >= 0 {
			n[i], ok[i] = g.Pending+g.Lag, true
		}
	}
	return n, ok, nil
}

// isNoStream reports an XINFO on a stream that does not exist (the first
// error of a pipeline; the others are read per command).
func isNoStream(err error) bool {
	var re redis.Error
	return err != nil && errors.As(err, &re) && re.Error() == "ERR no such key"
}
