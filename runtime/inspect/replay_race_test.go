package inspect

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/seqby/seqby/internal/redistest"
	"github.com/seqby/seqby/runtime/internal/rdb"
)

// replayInTheMiddle is a go-redis hook that, the first time replay A
// appends to the partition, runs replay B to completion first: two
// operators replaying one entry at the same moment.
type replayInTheMiddle struct {
	once  sync.Once
	other func()
}

func (h *replayInTheMiddle) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *replayInTheMiddle) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if appendsToPartition(cmd) {
			h.once.Do(h.other)
		}
		return next(ctx, cmd)
	}
}

func (h *replayInTheMiddle) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			if appendsToPartition(cmd) {
				h.once.Do(h.other)
			}
		}
		return next(ctx, cmds)
	}
}

// appendsToPartition: an XADD to shop:{a}, or a script given it as a key.
func appendsToPartition(cmd redis.Cmder) bool {
	args := cmd.Args()
	name := strings.ToLower(cmd.Name())
	for i, a := range args {
		if s, ok := a.(string); ok && s == "shop:{a}" && (name == "xadd" && i == 1 || strings.HasPrefix(name, "eval")) {
			return true
		}
	}
	return false
}

// TestConcurrentReplaysPublishOnce: two replays of one dead-letter entry
// at the same moment append the message once; the loser is refused.
func TestConcurrentReplaysPublishOnce(t *testing.T) {
	s := redistest.New(t)
	c := redis.NewClient(&redis.Options{Addr: s.Addr, ContextTimeoutEnabled: true})
	t.Cleanup(func() { c.Close() })
	ctx := ctxT(t)
	rdb.RegisterGroup(ctx, c, "shop", "h", false)
	ids := publish(t, c, "shop", "a", 2)
	halt(t, c, "h", "shop", "a")
	res, err := New(c).MoveToDLQ(ctx, "h", "shop:{a}", ids[0])
	if err != nil {
		t.Fatal(err)
	}
	all, err := New(c).DLQEntries(ctx, "")
	if err != nil || len(all) != 1 {
		t.Fatalf("DLQEntries: %v %v", all, err)
	}
	id := all[0].ID

	hooked := redis.NewClient(&redis.Options{Addr: s.Addr, ContextTimeoutEnabled: true})
	t.Cleanup(func() { hooked.Close() })
	var errB error
	hooked.AddHook(&replayInTheMiddle{other: func() { _, errB = New(c).ReplayDLQ(ctx, res.DLQ, id) }})
	repA, errA := New(hooked).ReplayDLQ(ctx, res.DLQ, id)
	if errB != nil {
		t.Fatalf("replay B: %v", errB)
	}
	if n := c.XLen(ctx, "shop:{a}").Val(); n != 3 {
		t.Fatalf("shop:{a} has %d entries after one dead-letter entry was replayed by two operators at once; want 3 (2 + 1)", n)
	}
	if errA == nil || repA.Published || !errors.Is(errA, ErrNoDLQEntry) {
		t.Fatalf("replay A, which lost the race: %+v, %v; want refused with ErrNoDLQEntry", repA, errA)
	}
}
