package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seqby/seqby/runtime/inspect"
	"github.com/seqby/seqby/runtime/internal/rdb"
)

// streamIDs returns the entry ids of a stream in order.
func streamIDs(t *testing.T, c redis.UniversalClient, stream string) []string {
	t.Helper()
	msgs, err := c.XRange(context.Background(), stream, "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range msgs {
		ids = append(ids, m.ID)
	}
	return ids
}

// waitHalts polls ListHalts until it lists n records.
func waitHalts(t *testing.T, c redis.UniversalClient, handler string, n int) []inspect.HaltRecord {
	t.Helper()
	var hs []inspect.HaltRecord
	eventually(t, 20*time.Second, "halt records of "+handler, func() bool {
		var err error
		hs, err = inspect.New(c).Halts(context.Background(), handler)
		if err != nil {
			t.Fatal(err)
		}
		return len(hs) == n
	})
	return hs
}

// An engine halts a partition on a poison head; the halt is listed from
// Redis; resolving the head with the wrong id is refused and changes
// nothing; resolving it with the head's id lets the partition continue
// with the next entries in order (for dlq, after copying the head).
func TestOperatorResolveHaltedHead(t *testing.T) {
	tests := []struct {
		name string
		dlq  bool
	}{{"skip", false}, {"dlq", true}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, ctx := newRedis(t), ctxT(t)
			j := newJournal()
			h := keyedHandler("ops", func(_ context.Context, e *testEvent) error {
				if e.Poison {
					return errPoison
				}
				j.enter(e.Client, seqKey(e.Client, e.Seq))
				j.leave(e.Client, seqKey(e.Client, e.Seq), e.Seq, true)
				return nil
			})
			opts := fastOptions("o1")
			opts.Retry.MaxRetries = -1
			startEngine(t, c, opts, h)
			p := NewPublisher(c)
			for _, m := range []*testEvent{{Client: "a", Seq: 1, Poison: true}, ev("a", 2), ev("a", 3), ev("b", 1), ev("b", 2)} {
				if err := p.Publish(ctx, m); err != nil {
					t.Fatal(err)
				}
			}
			ids := streamIDs(t, c, "order:{a}")
			hs := waitHalts(t, c, "ops", 1)
			r := hs[0]
			if r.Partition != "order:{a}" || r.Stream != "order:{a}" || r.EntryID != ids[0] || r.Category != "order" ||
				r.Key != "a" || !strings.Contains(r.Error, "poison") || r.Token == "" || r.Owner != "o1" {
				t.Fatalf("halt record %+v, want order:a halted on %s by o1 with the poison error", r, ids[0])
			}
			eventually(t, 10*time.Second, "b flows past a's halt", func() bool { return j.count("b") == 2 })

			before := snapshot(t, c, r)
			if _, err := inspect.New(c).Skip(ctx, "ops", "order:{a}", ids[1]); !errors.Is(err, inspect.ErrNotHead) {
				t.Fatalf("skip of a non-head entry: %v, want inspect.ErrNotHead", err)
			}
			if _, err := inspect.New(c).MoveToDLQ(ctx, "ops", "order:{a}", ids[1]); !errors.Is(err, inspect.ErrNotHead) {
				t.Fatalf("dlq of a non-head entry: %v, want inspect.ErrNotHead", err)
			}
			if after := snapshot(t, c, r); !reflect.DeepEqual(before, after) {
				t.Fatalf("a refused skip changed Redis:\nbefore %+v\nafter  %+v", before, after)
			}
			in, err := inspect.New(c).Inspect(ctx, "ops", "order:{a}")
			if err != nil {
				t.Fatal(err)
			}
			if in.Halt == nil || in.Head == nil || in.Head.ID != ids[0] || in.Lease != r.Token ||
				len(in.Lanes) == 0 || in.Lanes[0].Length != 3 || len(in.Lanes[0].Pending) == 0 || in.Lanes[0].Pending[0].ID != ids[0] ||
				in.Lanes[0].Pending[0].Consumer != r.Token || !strings.Contains(in.Head.Fields[rdb.FieldPayload], `"poison":true`) {
				t.Fatalf("inspection %+v, head %+v", in, in.Head)
			}

			resolve := (*inspect.Inspector).Skip
			if tt.dlq {
				resolve = (*inspect.Inspector).MoveToDLQ
			}
			res, err := resolve(inspect.New(c), ctx, "ops", "order:{a}", ids[0])
			if err != nil {
				t.Fatal(err)
			}
			eventually(t, 20*time.Second, "a continues after its head", func() bool { return j.count("a") == 2 })
			if got := j.seqs("a"); !slices.Equal(got, []int{2, 3}) {
				t.Fatalf("a applied %v, want [2 3]: the head skipped, the rest in order", got)
			}
			if hs, err := inspect.New(c).Halts(ctx, ""); err != nil || len(hs) != 0 {
				t.Fatalf("halts after resolving: %+v, %v", hs, err)
			}
			dlq, err := c.XRange(ctx, "order:{a}:dlq", "-", "+").Result()
			if err != nil {
				t.Fatal(err)
			}
			if !tt.dlq {
				if len(dlq) != 0 {
					t.Fatalf("skip wrote to the DLQ: %v", dlq)
				}
				return
			}
			if res.DLQ != "order:{a}:dlq" || len(dlq) != 1 || dlq[0].ID != res.DLQEntryID {
				t.Fatalf("resolution %+v, dlq %v", res, dlq)
			}
			v := dlq[0].Values
			if v["dlq_entry_id"] != ids[0] || v["dlq_stream"] != "order:{a}" || v["dlq_handler"] != "ops" ||
				!strings.Contains(v["payload"].(string), `"poison":true`) || v[rdb.FieldType] != "testEvent" {
				t.Fatalf("dlq copy %v", v)
			}
		})
	}
}

// state is what a refused operator action must leave untouched.
type state struct {
	Record, Lease string
	Indexed       bool
	Pending       []redis.XPendingExt
	Length        int64
	DLQ           int64
}

func snapshot(t *testing.T, c redis.UniversalClient, r inspect.HaltRecord) state {
	t.Helper()
	ctx := context.Background()
	var s state
	s.Record, _ = c.HGet(ctx, rdb.HaltRecord(r).RecordKey(), rdb.MetaHalt).Result()
	s.Indexed, _ = c.SIsMember(ctx, rdb.MarksKey(r.Handler), rdb.HaltRecord(r).RecordKey()).Result()
	s.Lease, _ = c.Get(ctx, r.LeaseKey).Result()
	ps, err := c.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: r.Stream, Group: laneGroup(t, c, r.Stream, r.Handler), Start: "-", End: "+", Count: 100}).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ps {
		p.Idle = 0 // grows by itself
		s.Pending = append(s.Pending, p)
	}
	s.Length, _ = c.XLen(ctx, r.Stream).Result()
	s.DLQ, _ = c.XLen(ctx, r.DLQ()).Result()
	return s
}

// The refusals, on a halt set up by hand (no engine): each leaves Redis as
// it was and says why.
func TestOperatorRefusals(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	tests := []struct {
		name      string
		partition string
		id        int // index of the entry to resolve
		setup     func(r *inspect.HaltRecord)
		want      error
	}{
		{"unknown partition", "order:{nope}", 0, nil, inspect.ErrNotHalted},
		{"not the recorded head", "order:{x}", 1, nil, inspect.ErrNotHead},
		{"record names a non-first pending entry", "order:{x}", 1, func(r *inspect.HaltRecord) { r.EntryID = "" }, inspect.ErrNotHead},
		{"another owner retries the head", "order:{x}", 0, func(r *inspect.HaltRecord) { c.Set(ctx, r.LeaseKey, "w2:9", 0) }, inspect.ErrRetrying},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, ids := haltFixture(t, c, "g"+string(rune('a'+i)), tt.setup)
			before := snapshot(t, c, r)
			for _, resolve := range []func(*inspect.Inspector, context.Context, string, string, string) (inspect.Resolution, error){(*inspect.Inspector).Skip, (*inspect.Inspector).MoveToDLQ} {
				if _, err := resolve(inspect.New(c), ctx, r.Handler, tt.partition, ids[tt.id]); !errors.Is(err, tt.want) {
					t.Fatalf("got %v, want %v", err, tt.want)
				}
			}
			if after := snapshot(t, c, r); !reflect.DeepEqual(before, after) {
				t.Fatalf("a refusal changed Redis:\nbefore %+v\nafter  %+v", before, after)
			}
		})
	}
	t.Run("free lease resolves by head stream", func(t *testing.T) {
		r, ids := haltFixture(t, c, "gz", func(r *inspect.HaltRecord) { c.Del(ctx, r.LeaseKey) })
		if _, err := inspect.New(c).Skip(ctx, r.Handler, r.Stream, ids[0]); err != nil {
			t.Fatal(err)
		}
		if s := snapshot(t, c, r); s.Record != "" || len(s.Pending) != 0 || s.Lease != "" {
			t.Fatalf("after skip %+v: want no record, nothing pending, no lease", s)
		}
	})
}

// haltFixture makes stream order:x with two entries, group's first entry
// pending for consumer w1:1 holding the lease, and its halt record; setup
// may alter the record (an empty EntryID: the second entry, delivered
// too) before it is written.
func haltFixture(t *testing.T, c redis.UniversalClient, group string, setup func(r *inspect.HaltRecord)) (inspect.HaltRecord, []string) {
	t.Helper()
	ctx := context.Background()
	stream := "order:{x}"
	c.Del(ctx, stream)
	for range 2 {
		if err := c.XAdd(ctx, &redis.XAddArgs{Stream: stream, Values: []any{rdb.FieldType, "testEvent", rdb.FieldPayload, "{}"}}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	ids := streamIDs(t, c, stream)
	if err := c.XGroupCreate(ctx, stream, group, "0").Err(); err != nil {
		t.Fatal(err)
	}
	r := inspect.HaltRecord{Handler: group, Partition: stream, Category: "order", Key: "x", Stream: stream,
		Streams: []string{stream}, EntryID: ids[0], Reason: "test", Owner: "w1", Token: "w1:1",
		LeaseKey: rdb.LeaseKey(stream, group), At: time.Now().UTC()}
	n := int64(1)
	if setup != nil {
		setup(&r)
		if r.EntryID == "" {
			r.EntryID, n = ids[1], 2
		}
	}
	if err := c.XReadGroup(ctx, &redis.XReadGroupArgs{Group: group, Consumer: r.Token, Streams: []string{stream, ">"}, Count: n, Block: -1}).Err(); err != nil {
		t.Fatal(err)
	}
	c.SetNX(ctx, r.LeaseKey, r.Token, 0)
	raw, _ := json.Marshal(r)
	key := rdb.HaltRecord(r).RecordKey()
	if err := c.HSet(ctx, key, rdb.MetaHalt, raw).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.SAdd(ctx, rdb.MarksKey(group), key).Err(); err != nil {
		t.Fatal(err)
	}
	return r, ids
}

// A record whose head is no longer pending (here acked by hand, outside
// seqby) is stale: no operation takes it for a halt, and each removes it.
func TestStaleHaltRecords(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	tests := []struct {
		name  string
		check func(r inspect.HaltRecord, ids []string) error
	}{
		{"ListHalts", func(r inspect.HaltRecord, _ []string) error {
			if hs, err := inspect.New(c).Halts(ctx, ""); err != nil || len(hs) != 0 {
				return fmt.Errorf("halts %+v, %v: want none", hs, err)
			}
			return nil
		}},
		{"Inspect", func(r inspect.HaltRecord, _ []string) error {
			in, err := inspect.New(c).Inspect(ctx, r.Handler, r.Partition)
			if err != nil || in.Halt != nil || !in.Stale {
				return fmt.Errorf("inspection %+v, %v: want stale, no halt", in, err)
			}
			return nil
		}},
		{"Skip", func(r inspect.HaltRecord, ids []string) error {
			if _, err := inspect.New(c).Skip(ctx, r.Handler, r.Partition, ids[0]); !errors.Is(err, inspect.ErrNotHalted) {
				return fmt.Errorf("skip: %v, want inspect.ErrNotHalted", err)
			}
			return nil
		}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, ids := haltFixture(t, c, fmt.Sprintf("stale%d", i), nil)
			c.XAck(ctx, r.Stream, r.Handler, ids[0])
			if err := tt.check(r, ids); err != nil {
				t.Fatal(err)
			}
			if s := snapshot(t, c, r); s.Record != "" || s.Indexed {
				t.Fatalf("stale record kept: %+v", s)
			}
		})
	}
}

// A halt that resolves itself (the next owner applies the head on its
// retry) leaves no record behind.
func TestHaltRecordRemovedWhenNextOwnerAppliesHead(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	var fail atomic.Bool
	fail.Store(true)
	j := newJournal()
	h := keyedHandler("ops", func(_ context.Context, e *testEvent) error {
		if e.Seq == 1 && fail.Load() {
			return errPoison
		}
		j.enter(e.Client, seqKey(e.Client, e.Seq))
		j.leave(e.Client, seqKey(e.Client, e.Seq), e.Seq, true)
		return nil
	})
	opts := fastOptions("o1")
	opts.Retry.MaxRetries = -1
	first := startEngine(t, c, opts, h)
	p := NewPublisher(c)
	for i := 1; i <= 2; i++ {
		if err := p.Publish(ctx, ev("a", i)); err != nil {
			t.Fatal(err)
		}
	}
	waitHalts(t, c, "ops", 1)
	first.stop() // releases the halted partition
	fail.Store(false)
	startEngine(t, c, fastOptions("o2"), h)
	eventually(t, 20*time.Second, "a applied by the next owner", func() bool { return j.count("a") == 2 })
	eventually(t, 10*time.Second, "halt record removed", func() bool {
		n, err := c.SCard(ctx, rdb.MarksKey("ops")).Result()
		return err == nil && n == 0
	})
}

// A pm correlation value halted on a poison payment is moved to the DLQ by
// the stream holding its head, and its later events apply.
func TestOperatorPMMoveToDLQ(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	pm := flowPM("flow", func(_ context.Context, _, _ string, pay *pmPayment) error {
		if pay != nil && pay.Poison {
			return errPoison
		}
		return nil
	})
	opts := fastOptions("p1")
	opts.Retry.MaxRetries = -1
	startEngine(t, c, opts, pm)
	p := NewPublisher(c)
	for _, m := range []Message{&pmOrder{OrderID: "o-1", Seq: 1}, &pmPayment{OrderID: "o-1", Seq: 1, Poison: true},
		&pmOrder{OrderID: "o-1", Seq: 2}, &pmPayment{OrderID: "o-1", Seq: 2}} {
		if err := p.Publish(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	r := waitHalts(t, c, "flow", 1)[0]
	head := streamIDs(t, c, "pmpayment:{o-1}")[0]
	if !r.PM || r.Partition != "o-1" || r.Stream != "pmpayment:{o-1}" || r.EntryID != head || r.LeaseKey != rdb.PMLeaseKey("flow", "o-1") {
		t.Fatalf("pm halt record %+v", r)
	}
	in, err := inspect.New(c).Inspect(ctx, "flow", "o-1")
	if err != nil {
		t.Fatal(err)
	}
	if in.Halt == nil || in.Head == nil || in.Head.Stream != "pmpayment:{o-1}" || in.Head.ID != head || len(in.Lanes) != 4 || in.Lease != r.Token {
		t.Fatalf("pm inspection %+v", in)
	}
	res, err := inspect.New(c).MoveToDLQ(ctx, "flow", "pmpayment:{o-1}", head)
	if err != nil {
		t.Fatal(err)
	}
	if res.DLQ != "pmpayment:{o-1}:dlq" {
		t.Fatalf("dlq %s", res.DLQ)
	}
	store := NewRedisStateStore(c)
	eventually(t, 20*time.Second, "o-1 continues after the DLQ", func() bool {
		f, _ := loadFlow(t, store, "flow", "o-1")
		return len(f.Orders) == 2 && len(f.Payments) == 1
	})
	if f, _ := loadFlow(t, store, "flow", "o-1"); !slices.Equal(f.Orders, []int{1, 2}) || !slices.Equal(f.Payments, []int{2}) {
		t.Fatalf("o-1 state %+v, want orders [1 2] and payments [2]", f)
	}
	if n, _ := c.XLen(ctx, "pmpayment:{o-1}:dlq").Result(); n != 1 {
		t.Fatalf("dlq length %d", n)
	}
}

// failEndAttempt fails every end_attempt.lua call before it is sent: an
// owner that cannot delete its attempt marks.
type failEndAttempt struct{ failed atomic.Int64 }

func (h *failEndAttempt) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *failEndAttempt) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if a := cmd.Args(); len(a) > 1 && strings.EqualFold(cmd.Name(), "evalsha") && rdb.ScriptName(fmt.Sprint(a[1])) == "end_attempt" {
			h.failed.Add(1)
			cmd.SetErr(errors.New("test: end_attempt lost"))
			return cmd.Err()
		}
		return next(ctx, cmd)
	}
}
func (h *failEndAttempt) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// An owner whose attempt of a halted head failed, and whose delete of the
// attempt mark failed too, keeps its lease and tries the head again only
// after HaltedRetryInterval: the mark it left refuses an operator's skip
// for a lease TTL at most, not as long as the owner holds the lease.
func TestSkipAfterALostEndAttempt(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	if err := NewPublisher(c).Publish(ctx, ev("x", 1)); err != nil {
		t.Fatal(err)
	}
	// x's head halted at an earlier owner, which is gone.
	x := rdb.PartitionStream("order", "x")
	head := deliverToEarlierOwner(t, c, x, "ea")
	r := rdb.HaltRecord{Handler: "ea", Partition: x, Category: "order", Key: "x", Stream: x, Streams: []string{x},
		EntryID: head, Reason: "handler failed", Owner: "old", Token: "old~1:5", LeaseKey: rdb.LeaseKey(x, "ea"), At: time.Now().UTC()}
	rec, _ := json.Marshal(r)
	c.HSet(ctx, r.RecordKey(), rdb.MetaHalt, string(rec))
	c.SAdd(ctx, rdb.MarksKey("ea"), r.RecordKey())

	ec := redis.NewClient(&redis.Options{Addr: c.Options().Addr})
	t.Cleanup(func() { ec.Close() })
	hook := &failEndAttempt{}
	ec.AddHook(hook)
	opts := fastOptions("new")
	opts.Retry.HaltedRetryInterval, opts.Retry.MaxRetries = time.Hour, 1
	startEngine(t, ec, opts, keyedHandler("ea", func(context.Context, *testEvent) error { return errors.New("still failing") }))

	eventually(t, 20*time.Second, "the new owner's failed attempt and lost end_attempt", func() bool { return hook.failed.Load() > 0 })
	in := inspect.New(c)
	eventually(t, 20*time.Second, "the skip of x's head", func() bool {
		_, err := in.Skip(ctx, "ea", x, head)
		return err == nil
	})
}
