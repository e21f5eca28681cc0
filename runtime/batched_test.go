package runtime

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seqby/seqby/runtime/internal/rdb"
)

// A batched partition (Registration.AckBatch) that halts acks the entries
// it ran before the head first, so the halted head is the partition's
// oldest pending entry, as under the default promise: a successor's halt
// record check and the operators' tools (inspect, skip) take the oldest
// pending entry for the head.
func TestBatchedHaltAcksWhatRanBefore(t *testing.T) {
	c := newRedis(t)
	ctx := ctxT(t)
	var ran seqLog
	h := keyedHandler("batched-halt", func(ctx context.Context, e *testEvent) error {
		ran.add(e.Seq)
		if e.Seq == 4 {
			return Permanent(fmt.Errorf("seq %d cannot apply", e.Seq))
		}
		return nil
	})
	h.AckBatch = 8
	for i := 1; i <= 6; i++ {
		if err := NewPublisher(c).Publish(ctx, ev("k", i)); err != nil {
			t.Fatal(err)
		}
	}
	halts := make(chan Halt, 1)
	opts := fastOptions("batched-1")
	opts.VerifyBound = time.Minute // no ack goes early for staleness
	opts.OnHalt = func(h Halt) {
		select {
		case halts <- h:
		default:
		}
	}
	startEngine(t, c, opts, h)
	var halt Halt
	select {
	case halt = <-halts:
	case <-time.After(20 * time.Second):
		t.Fatal("no halt")
	}
	if got, want := ran.seqs(), []int{1, 2, 3, 4}; !slices.Equal(got, want) {
		t.Fatalf("the handler ran %v, want %v", got, want)
	}
	stream := rdb.PartitionStream("order", "k")
	p, err := c.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: stream, Group: laneGroup(t, c, stream, h.Name), Start: "-", End: "+", Count: 10}).Result()
	if err != nil || len(p) != 3 || p[0].ID != halt.EntryID {
		t.Fatalf("pending after the halt: %+v %v; want the head %s first, then the two read ahead", p, err, halt.EntryID)
	}
}

// A batched partition with a backlog deeper than one read reads its next
// entries ahead of need (a prefetch carrying the acks so far): every
// entry still runs once, in order, and all end acked.
func TestBatchedPrefetchKeepsOrder(t *testing.T) {
	c := newRedis(t)
	runBatchedInOrder(t, c, c, fastOptions("batched-2"), 300)
}

// runBatchedInOrder publishes n events of one key on base, runs them with
// a handler batched by 8 on an engine reading through c with opts, and
// fails the test unless each ran once, in order, and all end acked.
func runBatchedInOrder(t *testing.T, base, c *redis.Client, opts Options, n int) {
	t.Helper()
	ctx := ctxT(t)
	var log seqLog
	h := keyedHandler("batched-order", func(ctx context.Context, e *testEvent) error {
		log.add(e.Seq)
		return nil
	})
	h.AckBatch = 8
	pub := NewPublisher(base)
	for i := range n {
		if err := pub.Publish(ctx, ev("k", i)); err != nil {
			t.Fatal(err)
		}
	}
	startEngine(t, c, opts, h)
	stream := rdb.PartitionStream("order", "k")
	eventually(t, 30*time.Second, "every entry run and acked", func() bool {
		p, err := base.XPending(ctx, stream, laneGroup(t, base, stream, h.Name)).Result()
		return len(log.seqs()) >= n && err == nil && p.Count == 0
	})
	ran := log.seqs()
	for i, seq := range ran {
		if seq != i {
			t.Fatalf("ran %v, want 0..%d once each in order (at %d: %d)", ran, n-1, i, seq)
		}
	}
	if len(ran) != n {
		t.Fatalf("ran %d entries, want %d", len(ran), n)
	}
}

// lostPrefetchHook loses the reply of the first pipeline carrying a
// round whose first slice is a read-new, or a plain one (the batched
// mode's prefetch),
// after Redis ran it: its entries are delivered, its acks done, and the
// engine hears only an error.
type lostPrefetchHook struct{ lost atomic.Bool }

func (*lostPrefetchHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (*lostPrefetchHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return next
}
func (h *lostPrefetchHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, c := range cmds {
			args := c.Args()
			// A plain prefetch (rdb/plain.go): XPENDING lane group (after ...
			plain := c.Name() == "xpending" && len(args) > 3 && strings.HasPrefix(fmt.Sprint(args[3]), "(")
			// EVALSHA sha numkeys keys... S U op ...
			if !plain && (c.Name() != "evalsha" || len(args) < 3) {
				continue
			}
			prefetch := plain
			if !plain {
				nk, _ := strconv.Atoi(fmt.Sprint(args[2]))
				i := 3 + nk + 2
				prefetch = i < len(args) && fmt.Sprint(args[i]) == "N"
			}
			if prefetch && h.lost.CompareAndSwap(false, true) {
				lost := errors.New("injected: the reply was lost")
				for _, c := range cmds {
					c.SetErr(lost)
				}
				return lost
			}
		}
		return err
	}
}

// A prefetch whose reply is lost after Redis ran it left its entries
// pending under the owner, newer than those it holds: they run after
// those, handed over by the next read's pending pass, and no later entry
// runs before them (the first version sent another prefetch, which ran
// later entries first).
func TestBatchedLostPrefetchReplyKeepsOrder(t *testing.T) {
	base := newRedis(t)
	hook := &lostPrefetchHook{}
	opts := fastOptions("batched-3")
	// Reads of 32: the prefetch goes with 16 held, and its reply is taken
	// (and found lost) when 8 acks wait, 8 entries still held.
	opts.ReadAhead = 32
	runBatchedInOrder(t, base, hooked(t, base, hook), opts, 300)
	if !hook.lost.Load() {
		t.Fatal("no prefetch was sent: the test saw nothing")
	}
}

// seqLog records the seqs a handler ran, in order, from any goroutine.
type seqLog struct {
	mu  sync.Mutex
	ran []int
}

func (l *seqLog) add(seq int) {
	l.mu.Lock()
	l.ran = append(l.ran, seq)
	l.mu.Unlock()
}

// seqs is a copy of what ran so far.
func (l *seqLog) seqs() []int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.ran)
}
