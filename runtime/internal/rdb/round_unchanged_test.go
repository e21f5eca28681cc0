package rdb

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"regexp"
	"testing"

	"github.com/redis/go-redis/v9"
)

// The reads moved into lib/read.lua and lib/oldest.lua (to be shared with
// round.lua) reply and change Redis exactly as before: testdata holds
// read.lua and read_oldest.lua as they were assembled before the move,
// and both versions run on identical copies of random states, call after
// call (each acking what the previous call returned, or a random id),
// comparing every reply byte for byte and the copies' state after each.
func TestRoundSingleScriptsUnchanged(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	for _, tc := range []struct {
		op     byte
		before string
		now    *redis.Script
		// arg is ARGV[3] of a call over lanes: read.lua's count (1..3),
		// read_oldest.lua's primaries (0..lanes).
		arg    func(rng *rand.Rand, lanes int) int
		trials int
	}{
		{'R', "testdata/read_before_round.lua", scriptRead, func(rng *rand.Rand, _ int) int { return 1 + rng.Intn(3) }, 150},
		{'O', "testdata/read_oldest_before_round.lua", scriptReadOldest, func(rng *rand.Rand, lanes int) int { return rng.Intn(lanes + 1) }, 150},
	} {
		src, err := os.ReadFile(tc.before)
		if err != nil {
			t.Fatal(err)
		}
		before := redis.NewScript(string(src))
		seen := map[string]int{}
		for trial := range tc.trials {
			rng := rand.New(rand.NewSource(int64(trial)))
			group := "g"
			a := newRoundCopy(fmt.Sprintf("u%c%d", tc.op, trial), tc.op == 'O', group)
			b := newRoundCopy(fmt.Sprintf("v%c%d", tc.op, trial), tc.op == 'O', group)
			if tc.op == 'R' {
				// One to three lanes: the stream alone, or with one or
				// two backfill lanes.
				n := 1 + rng.Intn(3)
				a.lanes = append(a.lanes, SubStream(a.lanes[0], "backfill2"))[:n]
				b.lanes = append(b.lanes, SubStream(b.lanes[0], "backfill2"))[:n]
			}
			steps, ids := genRoundState(rng, len(a.lanes), group)
			a.apply(ctx, t, c, steps)
			b.apply(ctx, t, c, steps)
			token := roundToken
			if rng.Intn(10) == 0 {
				token = "o~x:6" // a past generation: fenced
			}
			if rng.Intn(12) > 0 { // else the lease is missing: fenced
				c.Set(ctx, a.lease, roundToken, 0)
				c.Set(ctx, b.lease, roundToken, 0)
			}
			var last []any
			for call := range 6 {
				arg := tc.arg(rng, len(a.lanes))
				ackLane, ackID := 0, ""
				if l, es := lastEntry(last); l > 0 && rng.Intn(4) > 0 {
					ackLane, ackID = l, es
				} else if l := rng.Intn(len(a.lanes)); rng.Intn(3) == 0 && len(ids[l]) > 0 {
					ackLane, ackID = l+1, ids[l][rng.Intn(len(ids[l]))]
				}
				// Error steps, alike on both copies: a lane of another
				// type, an ack id that is not an id, an ack lane beyond
				// the lanes.
				switch rng.Intn(40) {
				case 0:
					l := rng.Intn(len(a.lanes))
					for _, rc := range []roundCopy{a, b} {
						c.Del(ctx, rc.lanes[l])
						c.HSet(ctx, rc.lanes[l], "not", "a stream")
					}
				case 1:
					ackLane, ackID = 1, "not-an-id"
				case 2:
					ackLane, ackID = len(a.lanes)+1, "1-1"
				}
				hit := branches(ctx, t, c, b, group)
				ra, erra := before.Run(ctx, c, a.keysBeforePause(), token, group, arg, ackLane, ackID).Result()
				rb, errb := tc.now.Run(ctx, c, b.keys(), token, group, arg, ackLane, ackID).Result()
				if ga, gb := normalize([]any{ra, stripScript(erra)}, a.tag), normalize([]any{rb, stripScript(errb)}, b.tag); ga != gb {
					t.Fatalf("%c trial %d call %d: before the move\n %s\nnow\n %s", tc.op, trial, call, ga, gb)
				}
				if sa, sb := a.state(ctx, t, c), b.state(ctx, t, c); sa != sb {
					t.Fatalf("%c trial %d call %d: state before the move\n%s\nnow\n%s", tc.op, trial, call, sa, sb)
				}
				last, _ = ra.([]any)
				seen[replyKind(last, erra)]++
				if errb == nil {
					// The branches the call took: a lane's group created
					// (NOGROUP), every lane visited with one missing.
					after := branches(ctx, t, c, b, group)
					if hit["nogroup"] > after["nogroup"] {
						seen["nogroup branch"]++
					}
					if lane, _ := last[0].(int64); lane == 0 && hit["missing"] > 0 {
						seen["missing stream branch"]++
					}
				}
			}
		}
		// The random states reached every kind of reply and branch.
		for _, k := range []string{"fenced", "error", "drained", "pending", "new", "deleted", "nogroup branch", "missing stream branch"} {
			if seen[k] == 0 {
				t.Errorf("%c: no %s among %v", tc.op, k, seen)
			}
		}
		t.Logf("%c: %v", tc.op, seen)
	}
}

// branches counts rc's lanes that are streams without group (nogroup)
// and lanes that do not exist (missing).
func branches(ctx context.Context, t *testing.T, c redis.UniversalClient, rc roundCopy, group string) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, lane := range rc.lanes {
		switch c.Type(ctx, lane).Val() {
		case "none":
			out["missing"]++
		case "stream":
			found := false
			for _, g := range c.XInfoGroups(ctx, lane).Val() {
				found = found || g.Name == group
			}
			if !found {
				out["nogroup"]++
			}
		}
	}
	return out
}

// scriptSuffix is what Redis 7.0 appends to a script's error reply: the
// script's SHA and the line, which differ between two versions of a
// script; and a Lua error's own position.
var scriptSuffix = regexp.MustCompile(` script: [0-9a-f]{40}, on @user_script:\d+\.$|user_script:\d+: `)

// stripScript is err's text without scriptSuffix, "<nil>" for none.
func stripScript(err error) string {
	return scriptSuffix.ReplaceAllString(fmt.Sprint(err), "")
}

// replyKind classifies a single read script's reply: fenced, drained,
// deleted (an entry XDEL'd while pending), pending (from the pending
// pass: deliveries above 1), or new.
func replyKind(reply []any, err error) string {
	if isFenceErr(err) {
		return "fenced"
	}
	if err != nil {
		return "error"
	}
	if lane, _ := reply[0].(int64); lane == 0 {
		return "drained"
	}
	es, _ := reply[1].([]any)
	if e, _ := es[0].([]any); len(e) == 2 && e[1] == nil {
		return "deleted"
	}
	if d, _ := reply[2].(int64); d > 1 {
		return "pending"
	}
	return "new"
}

// lastEntry is the lane (1-based) and id of the last entry a read reply
// returned, 0 when none.
func lastEntry(reply []any) (int, string) {
	if len(reply) < 2 {
		return 0, ""
	}
	lane, _ := reply[0].(int64)
	es, _ := reply[1].([]any)
	if lane == 0 || len(es) == 0 {
		return 0, ""
	}
	e, _ := es[len(es)-1].([]any)
	id, _ := e[0].(string)
	return int(lane), id
}
