package rdb

import (
	"context"
	"fmt"
	"math/rand"
	"sort"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// roundCopy is one copy of a random partition state, written under its
// own hash tag, so that two copies with the same seed hold the same
// entries (explicit ids), groups, pending entries and delivery counts
// under different keys: one for the single script, one for a round.
type roundCopy struct {
	tag   string   // the hash tag (the partition key)
	lease string   // lease key
	lanes []string // R: primary, backfill; O: two primaries, backfill
}

// newRoundCopy names the keys of a copy: a keyed partition (its stream
// and backfill lane), or with pm a pm's correlation value (two primaries,
// one backfill lane).
func newRoundCopy(tag string, pm bool, group string) roundCopy {
	primary := PartitionStream("order", tag)
	if pm {
		return roundCopy{tag: tag, lease: PMLeaseKey(group, tag),
			lanes: []string{primary, PartitionStream("pay", tag), SubStream(primary, "backfill")}}
	}
	return roundCopy{tag: tag, lease: LeaseKey(primary, group), lanes: []string{primary, SubStream(primary, "backfill")}}
}

// keys are every key of the copy, lease first.
func (rc roundCopy) keys() []string {
	return append([]string{rc.lease, MetaKey(rc.lease)}, rc.lanes...)
}

// keysBeforePause are the KEYS of the read scripts as they were before the
// pause mark joined them: the lease, then the lanes.
func (rc roundCopy) keysBeforePause() []string { return append([]string{rc.lease}, rc.lanes...) }

// roundToken is the consumer and token of every generated state, so two
// copies deliver to the same consumer name.
const roundToken = "o~x:7"

// roundStep is one command of a generated history, lanes named by index.
type roundStep struct {
	lane int
	args []any // "$lane" stands for the lane's key
}

// genRoundState draws a history of appends (explicit, increasing ids
// across lanes, so the oldest-first choice is exercised), group creation,
// deliveries to the owner and to another consumer, re-deliveries of
// pending entries, acks and deletions of pending entries. It returns the
// history and the ids appended per lane.
func genRoundState(rng *rand.Rand, lanes int, group string) ([]roundStep, [][]string) {
	var steps []roundStep
	ids := make([][]string, lanes)
	ms := 1
	for range 5 + rng.Intn(25) {
		l := rng.Intn(lanes)
		switch x := rng.Intn(20); {
		case x < 8:
			ms += 1 + rng.Intn(3)
			id := fmt.Sprintf("%d-%d", ms, rng.Intn(3))
			ids[l] = append(ids[l], id)
			steps = append(steps, roundStep{l, []any{"XADD", "$lane", id, "n", fmt.Sprint(ms), "pad", strings.Repeat("x", rng.Intn(4))}})
		case x < 10:
			steps = append(steps, roundStep{l, []any{"XGROUP", "CREATE", "$lane", group, "0", "MKSTREAM"}})
		case x < 13:
			steps = append(steps, roundStep{l, []any{"XREADGROUP", "GROUP", group, roundToken, "COUNT", 1 + rng.Intn(3), "STREAMS", "$lane", ">"}})
		case x < 14:
			steps = append(steps, roundStep{l, []any{"XREADGROUP", "GROUP", group, "other:1", "COUNT", 1, "STREAMS", "$lane", ">"}})
		case x < 16:
			steps = append(steps, roundStep{l, []any{"XREADGROUP", "GROUP", group, roundToken, "COUNT", 1 + rng.Intn(2), "STREAMS", "$lane", "0"}})
		case x < 18 && len(ids[l]) > 0:
			steps = append(steps, roundStep{l, []any{"XACK", "$lane", group, ids[l][rng.Intn(len(ids[l]))]}})
		case len(ids[l]) > 0:
			steps = append(steps, roundStep{l, []any{"XDEL", "$lane", ids[l][rng.Intn(len(ids[l]))]}})
		}
	}
	return steps, ids
}

// apply runs the history on the copy; commands refused (a read before the
// group exists) are refused alike on every copy.
func (rc roundCopy) apply(ctx context.Context, t *testing.T, c redis.UniversalClient, steps []roundStep) {
	t.Helper()
	for _, s := range steps {
		args := make([]any, len(s.args))
		for i, a := range s.args {
			if a == "$lane" {
				a = rc.lanes[s.lane]
			}
			args[i] = a
		}
		if err := c.Do(ctx, args...).Err(); err != nil && err != redis.Nil && !IsNoGroup(err) && !strings.HasPrefix(err.Error(), "BUSYGROUP") {
			t.Fatalf("%v: %v", args, err)
		}
	}
}

// state describes everything of the copy a read may change, with its own
// key names replaced by the lane's index, so copies compare equal: the
// lease, each lane's entries, groups (last-delivered id, entries read,
// pending count, consumers) and pending entries (id, consumer, deliveries;
// not idle times).
func (rc roundCopy) state(ctx context.Context, t *testing.T, c redis.UniversalClient) string {
	t.Helper()
	var b strings.Builder
	lease, err := c.Get(ctx, rc.lease).Result()
	if err != nil && err != redis.Nil {
		t.Fatal(err)
	}
	fmt.Fprintf(&b, "lease=%q\n", lease)
	for i, lane := range rc.lanes {
		// A lane a test overwrote with another type, to make a read fail.
		if typ := c.Type(ctx, lane).Val(); typ != "stream" && typ != "none" {
			fmt.Fprintf(&b, "lane %d is a %s\n", i, typ)
			continue
		}
		xs, err := c.XRange(ctx, lane, "-", "+").Result()
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "lane %d entries %v\n", i, xs)
		gs, err := c.XInfoGroups(ctx, lane).Result()
		if err != nil && !strings.HasPrefix(err.Error(), "ERR no such key") {
			t.Fatal(err)
		}
		for _, g := range gs {
			fmt.Fprintf(&b, "lane %d group %s consumers=%d pending=%d last=%s read=%d lag=%d\n",
				i, g.Name, g.Consumers, g.Pending, g.LastDeliveredID, g.EntriesRead, g.Lag)
			cs, err := c.XInfoConsumers(ctx, lane, g.Name).Result()
			if err != nil {
				t.Fatal(err)
			}
			sort.Slice(cs, func(a, b int) bool { return cs[a].Name < cs[b].Name })
			for _, cn := range cs {
				fmt.Fprintf(&b, "  consumer %s pending=%d\n", cn.Name, cn.Pending)
			}
			ps, err := c.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: lane, Group: g.Name, Start: "-", End: "+", Count: 1000}).Result()
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range ps {
				fmt.Fprintf(&b, "  pending %s %s %d\n", p.ID, p.Consumer, p.RetryCount)
			}
		}
	}
	return b.String()
}

// normalize replaces a copy's tag in a reply (a fence error names the
// lease key) with a neutral one, so two copies' replies compare.
func normalize(v any, tag string) string {
	return strings.ReplaceAll(fmt.Sprintf("%#v", v), "{"+tag+"}", "{T}")
}
