package runtime

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/seqby/seqby/runtime/inspect"
)

// A replayed dead-letter entry tells the handlers what it is (issue #23,
// finding 9): MessageInfo.Replay names the original entry, the
// dead-letter entry and the handler that halted on it; the message id is
// the original's. Both handlers of the category get the replay, after the
// later entry; only entries that are replays carry Replay.
func TestReplayMessageInfo(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	var cured atomic.Bool
	var mu sync.Mutex
	seen := map[string][]MessageInfo{} // handler -> MessageInfo of each applied entry, in order
	record := func(handler string, poison func(*testEvent) bool) Registration {
		return keyedHandler(handler, func(ctx context.Context, e *testEvent) error {
			if poison(e) {
				return errPoison
			}
			mi, ok := MessageFromContext(ctx)
			if !ok {
				t.Errorf("%s: no MessageInfo", handler)
			}
			mu.Lock()
			seen[handler] = append(seen[handler], mi)
			mu.Unlock()
			return nil
		})
	}
	ops := record("ops", func(e *testEvent) bool { return e.Poison && !cured.Load() })
	other := record("other", func(*testEvent) bool { return false })
	opts := fastOptions("o1")
	opts.Retry.MaxRetries = -1
	startEngine(t, c, opts, ops, other)

	p := NewPublisher(c)
	if err := p.Publish(ctx, &testEvent{Client: "a", Seq: 1, Poison: true}, WithMessageID("m-1")); err != nil {
		t.Fatal(err)
	}
	if err := p.Publish(ctx, ev("a", 2), WithMessageID("m-2")); err != nil {
		t.Fatal(err)
	}
	ids := streamIDs(t, c, "order:{a}")
	waitHalts(t, c, "ops", 1)
	in := inspect.New(c)
	res, err := in.MoveToDLQ(ctx, "ops", "order:{a}", ids[0])
	if err != nil {
		t.Fatal(err)
	}
	count := func(h string) int {
		mu.Lock()
		defer mu.Unlock()
		return len(seen[h])
	}
	eventually(t, 20*time.Second, "ops applies #2 past the dead-lettered head", func() bool { return count("ops") == 1 })
	eventually(t, 20*time.Second, "other applies #1 and #2", func() bool { return count("other") == 2 })

	cured.Store(true) // the fix is deployed
	rep, err := in.ReplayDLQ(ctx, res.DLQ, res.DLQEntryID)
	if err != nil || !rep.Published {
		t.Fatalf("ReplayDLQ: %+v, %v", rep, err)
	}
	eventually(t, 20*time.Second, "both handlers get the replay", func() bool { return count("ops") == 2 && count("other") == 3 })
	want := &ReplayInfo{OriginalStream: "order:{a}", OriginalEntryID: ids[0], DLQ: "order:{a}:dlq", DLQEntryID: res.DLQEntryID, Handler: "ops"}

	mu.Lock()
	defer mu.Unlock()
	for h, infos := range seen {
		last := infos[len(infos)-1]
		if last.Stream != "order:{a}" || !idAfter(last.EntryID, ids[1]) || last.MessageID != "m-1" || last.PublishedAt.IsZero() {
			t.Errorf("%s: the replay's MessageInfo %+v; want a new entry of order:{a} after %s, message id m-1 (the original's), its publish time", h, last, ids[1])
		}
		if diff := cmp.Diff(want, last.Replay); diff != "" {
			t.Errorf("%s: MessageInfo.Replay (-want +got):\n%s", h, diff)
		}
		for _, mi := range infos[:len(infos)-1] {
			if mi.Replay != nil {
				t.Errorf("%s: entry %s (message %s) is no replay, but MessageInfo.Replay is %+v", h, mi.EntryID, mi.MessageID, mi.Replay)
			}
		}
	}
	if got := []string{seen["other"][0].MessageID, seen["other"][1].MessageID, seen["other"][2].MessageID}; !cmp.Equal(got, []string{"m-1", "m-2", "m-1"}) {
		t.Errorf("other handled messages %v; want m-1, m-2, then the replay of m-1", got)
	}
}

// idAfter reports whether stream entry id a comes after b.
func idAfter(a, b string) bool {
	parse := func(id string) (ms, seq uint64) {
		m, s, _ := strings.Cut(id, "-")
		ms, _ = strconv.ParseUint(m, 10, 64)
		seq, _ = strconv.ParseUint(s, 10, 64)
		return ms, seq
	}
	am, as := parse(a)
	bm, bs := parse(b)
	return am > bm || am == bm && as > bs
}
