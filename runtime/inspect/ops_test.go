package inspect

import (
	"context"
	"encoding/json"
	"errors"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/redis/go-redis/v9"
	"github.com/seqby/seqby/internal/redistest"
	"github.com/seqby/seqby/runtime/internal/rdb"
)

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func newRedis(t *testing.T) *redis.Client {
	s := redistest.New(t)
	c := redis.NewClient(&redis.Options{Addr: s.Addr, ContextTimeoutEnabled: true})
	t.Cleanup(func() { c.Close() })
	return c
}

// publish appends n entries to category's partition key the way the
// publisher does, returning their ids.
func publish(t *testing.T, c redis.UniversalClient, category, key string, n int) []string {
	t.Helper()
	ctx := context.Background()
	stream := rdb.PartitionStream(category, key)
	for range n {
		f := []any{rdb.FieldType, "T", rdb.FieldID, "m-" + key, rdb.FieldPayload, "{}", rdb.FieldPublishedAt, "2024-01-01T00:00:00Z"}
		if err := rdb.Publish(ctx, c, category, key, stream, 10000, f, rdb.Once{}); err != nil {
			t.Fatal(err)
		}
	}
	msgs, err := c.XRange(ctx, stream, "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range msgs {
		ids = append(ids, m.ID)
	}
	return ids
}

// halt makes handler's partition of category/key halted on its first
// entry as an engine would leave it: the group read it under the lease
// token w1:7 and a halt record describes it.
func halt(t *testing.T, c redis.UniversalClient, handler, category, key string) rdb.HaltRecord {
	t.Helper()
	ctx := context.Background()
	stream := rdb.PartitionStream(category, key)
	if _, err := rdb.CreateGroup(ctx, c, stream, handler, false); err != nil {
		t.Fatal(err)
	}
	es, err := rdb.ReadGroup(ctx, c, stream, handler, "w1:7", ">", 1, -1)
	if err != nil || len(es) != 1 {
		t.Fatalf("read the head: %v, %v", es, err)
	}
	r := rdb.HaltRecord{Handler: handler, Partition: stream, Category: category, Key: key, Stream: stream,
		Streams: []string{stream}, EntryID: es[0].ID, MessageType: "T", Reason: "failed", Error: "boom", Owner: "w1",
		Token: "w1:7", LeaseKey: rdb.LeaseKey(stream, handler), At: time.Unix(1, 0).UTC()}
	b, _ := json.Marshal(r)
	if err := c.HSet(ctx, r.RecordKey(), rdb.MetaHalt, string(b)).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Index(ctx, c, handler, r.RecordKey()); err != nil {
		t.Fatal(err)
	}
	return r
}

// Handlers are known from the groups registry, and typos of handlers and
// partitions are errors that suggest the right name.
func TestHandlerAndCheckPartition(t *testing.T) {
	redistest.Topologies(t, func(t *testing.T, c redis.UniversalClient) {
		ctx := ctxT(t)
		in := New(c)
		if _, err := in.Handler(ctx, "orders"); !errors.Is(err, ErrUnknownHandler) || !strings.Contains(err.Error(), "no handler has registered") {
			t.Fatalf("handler on an empty Redis: %v", err)
		}
		for _, r := range []struct{ cat, group string }{{"shop", "orders"}, {"pay", "orders"}, {"shop", "ops"}} {
			if _, err := rdb.RegisterGroup(ctx, c, r.cat, r.group, false); err != nil {
				t.Fatal(err)
			}
		}
		publish(t, c, "shop", "a", 2)
		publish(t, c, "pay", "a", 1)
		publish(t, c, "other", "b", 1)
		h := halt(t, c, "ops", "shop", "a")
		// A pm's halt, known only from its record.
		pm := rdb.HaltRecord{Handler: "flow", PM: true, Partition: "o-1", Category: "pay", Key: "o-1", Stream: "pay:{o-1}", Streams: []string{"pay:{o-1}"}, EntryID: "1-0"}
		b, _ := json.Marshal(pm)
		c.HSet(ctx, pm.RecordKey(), rdb.MetaHalt, string(b))
		rdb.Index(ctx, c, "flow", pm.RecordKey())

		hs, err := in.KnownHandlers(ctx)
		if err != nil {
			t.Fatal(err)
		}
		want := []HandlerInfo{{"flow", []string{}}, {"ops", []string{"shop"}}, {"orders", []string{"pay", "shop"}}}
		if diff := cmp.Diff(want, hs); diff != "" {
			t.Fatalf("known handlers (-want +got):\n%s", diff)
		}
		tests := []struct {
			name, handler, partition string
			want                     error
			text                     string
		}{
			{"partition stream", "orders", "pay:{a}", nil, ""},
			{"halted partition", "ops", h.Partition, nil, ""},
			{"pm value while halted", "flow", "o-1", nil, ""},
			{"pm head's stream", "flow", "pay:{o-1}", nil, ""},
			{"unknown handler", "ordres", "shop:{a}", ErrUnknownHandler, `unknown handler "ordres" (did you mean "orders"?); known handlers: flow, ops, orders`},
			{"no such key", "orders", "shop:{aa}", ErrNoPartition, `no such partition "shop:{aa}" of handler orders (did you mean "shop:{a}"?)`},
			{"category it does not read", "ops", "pay:{a}", ErrNoPartition, "of a category it reads (shop)"},
			{"category nobody reads", "orders", "other:{b}", ErrNoPartition, "of a category it reads (pay, shop)"},
			{"a lane is not a partition", "orders", "shop:{a}:backfill", ErrNoPartition, ""},
			{"nothing near", "orders", "zzzzzzzzzz", ErrNoPartition, `"zzzzzzzzzz" of handler orders: a partition`},
			{"a bare key", "orders", "a", ErrNoPartition, `no such partition "a" of handler orders (did you mean "pay:{a}"?)`},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				err := in.CheckPartition(ctx, tt.handler, tt.partition)
				if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.text)) {
					t.Fatalf("CheckPartition(%s, %s) = %v; want %v containing %q", tt.handler, tt.partition, err, tt.want, tt.text)
				}
			})
		}
	})
}

// Partitions lists every partition of the handler's categories with its
// owner, generation, pending, lag, halt and idle time.
func TestPartitions(t *testing.T) {
	redistest.Topologies(t, func(t *testing.T, c redis.UniversalClient) {
		ctx := ctxT(t)
		in := New(c)
		for _, cat := range []string{"shop", "note"} {
			rdb.RegisterGroup(ctx, c, cat, "h", false)
		}
		rdb.RegisterGroup(ctx, c, "empty", "h", false)
		publish(t, c, "shop", "a", 3)  // halted on its head: owner w1:7, 1 pending, 2 undelivered
		publish(t, c, "shop", "b", 2)  // never read: lag 2
		publish(t, c, "shop", "pm", 1) // a pm's lease on the value
		halt(t, c, "h", "shop", "a")
		c.Set(ctx, rdb.LeaseKey("shop:{a}", "h"), "w1:7", 0)
		c.Set(ctx, rdb.PMLeaseKey("h", "pm"), "host:9:12", 0)
		c.XAdd(ctx, &redis.XAddArgs{Stream: rdb.BackfillStream("shop", "b", rdb.DefaultBackfillSuffix), Values: []any{"k", "v"}})
		c.SAdd(ctx, rdb.IndexKey("shop"), "gone") // indexed, never appended
		c.XAdd(ctx, &redis.XAddArgs{Stream: "note", Values: []any{"k", "v"}})

		got, err := in.Partitions(ctx, "h")
		if err != nil {
			t.Fatal(err)
		}
		want := []PartitionInfo{
			{Category: "note", Stream: "note", Lag: 1},
			{Category: "shop", Key: "a", Stream: "shop:{a}", Owner: "w1", Generation: 7, Pending: 1, Lag: 2, Halted: true},
			{Category: "shop", Key: "b", Stream: "shop:{b}", Lag: 3},
			{Category: "shop", Key: "gone", Stream: "shop:{gone}", Idle: -1},
			{Category: "shop", Key: "pm", Stream: "shop:{pm}", Owner: "host:9", Generation: 12, Lag: 1},
		}
		if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(PartitionInfo{}, "Idle", "HeadAge")); diff != "" {
			t.Fatalf("(-want +got):\n%s", diff)
		}
		for _, p := range got {
			if p.Key == "gone" && p.Idle != -1 || p.Key != "gone" && (p.Idle < 0 || p.Idle > time.Minute) {
				t.Errorf("%s idle %v", p.Stream, p.Idle)
			}
			if p.Key == "gone" && p.HeadAge != -1 || p.Key != "gone" && (p.HeadAge < 0 || p.HeadAge > time.Minute) {
				t.Errorf("%s head age %v", p.Stream, p.HeadAge)
			}
		}
		if _, err := in.Partitions(ctx, "hh"); !errors.Is(err, ErrUnknownHandler) {
			t.Fatalf("partitions of an unknown handler: %v", err)
		}
		// Engines with another BackfillSuffix: its lane counts only when
		// the Inspector is told.
		for range 2 {
			c.XAdd(ctx, &redis.XAddArgs{Stream: rdb.BackfillStream("shop", "b", "bf"), Values: []any{"k", "v"}})
		}
		for suffix, want := range map[string]int64{"": 3, "bf": 4} { // 2 on the stream, 1 on "backfill", 2 on "bf"
			i := in
			if suffix != "" {
				i = in.WithBackfillSuffix(suffix)
			}
			got, err := i.Partitions(ctx, "h")
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range got {
				if p.Key == "b" && p.Lag != want {
					t.Errorf("backfill suffix %q: lag of shop:{b} %d, want %d", suffix, p.Lag, want)
				}
			}
		}
	})
}

// A dry run of skip and dlq checks like the real thing and changes
// nothing.
func TestCheckSkipAndMove(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	in := New(c)
	rdb.RegisterGroup(ctx, c, "shop", "h", false)
	ids := publish(t, c, "shop", "a", 2)
	halt(t, c, "h", "shop", "a")
	keys := func() string {
		ks := c.Keys(ctx, "*").Val()
		sort.Strings(ks) // KEYS replies in hash-table order, which a rehash changes
		p, _ := c.XPending(ctx, "shop:{a}", "h").Result()
		return strings.Join(ks, " ") + " " + p.Lower + " " + p.Higher
	}
	before := keys()
	res, err := in.CheckMoveToDLQ(ctx, "h", "shop:{a}", ids[0])
	if err != nil || res.DLQ != "shop:{a}:dlq" || res.Record.EntryID != ids[0] || res.DLQEntryID != "" {
		t.Fatalf("CheckMoveToDLQ: %+v, %v", res, err)
	}
	if _, err := in.CheckSkip(ctx, "h", "shop:{a}", ids[1]); !errors.Is(err, ErrNotHead) {
		t.Fatalf("CheckSkip of a non-head: %v", err)
	}
	c.Set(ctx, rdb.LeaseKey("shop:{a}", "h"), "w2:8", 0)
	if _, err := in.CheckSkip(ctx, "h", "shop:{a}", ids[0]); !errors.Is(err, ErrRetrying) {
		t.Fatalf("CheckSkip under a retrying owner: %v", err)
	}
	c.Del(ctx, rdb.LeaseKey("shop:{a}", "h"))
	if after := keys(); after != before {
		t.Fatalf("the checks changed something:\n%s\n%s", before, after)
	}
	if _, err := in.MoveToDLQ(ctx, "h", "shop:{a}", ids[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := in.CheckSkip(ctx, "h", "shop:{a}", ids[0]); !errors.Is(err, ErrNotHalted) {
		t.Fatalf("CheckSkip after the move: %v", err)
	}
}

// Dead-letter entries are listed, replayed to the end of their partition
// (indexed and signalled, even when their message id is in the dedup
// window) and dropped; the checks change nothing.
func TestDLQ(t *testing.T) {
	redistest.Topologies(t, func(t *testing.T, c redis.UniversalClient) {
		ctx := ctxT(t)
		in := New(c)
		rdb.RegisterGroup(ctx, c, "shop", "h", false)
		rdb.RegisterGroup(ctx, c, "shop", "g", false)
		ids := publish(t, c, "shop", "a", 2)
		halt(t, c, "h", "shop", "a")
		if _, err := in.MoveToDLQ(ctx, "h", "shop:{a}", ids[0]); err != nil {
			t.Fatal(err)
		}
		// The message was published with WithMessageID: its dedup key is
		// still there.
		c.Set(ctx, rdb.DedupKey("shop", "a", "m-a"), ids[0], time.Hour)
		// A head deleted from its stream before it was moved.
		bare, _ := c.XAdd(ctx, &redis.XAddArgs{Stream: "shop:{a}:dlq", Values: []any{rdb.DLQFieldStream, "shop:{a}", rdb.DLQFieldHandler, "g"}}).Result()

		all, err := in.DLQEntries(ctx, "")
		if err != nil || len(all) != 2 {
			t.Fatalf("DLQEntries: %+v, %v", all, err)
		}
		d := all[0]
		if d.DLQ != "shop:{a}:dlq" || d.Stream != "shop:{a}" || d.EntryID != ids[0] || d.Handler != "h" || d.Reason != "failed" ||
			d.Error != "boom" || d.MessageType != "T" || d.MessageID != "m-a" || d.Fields["payload"] != "{}" || len(d.Fields) != 4 || d.MovedAt.IsZero() {
			t.Fatalf("DLQ entry %+v", d)
		}
		if hs, err := in.DLQEntries(ctx, "g"); err != nil || len(hs) != 1 || hs[0].ID != bare {
			t.Fatalf("DLQEntries of g: %+v, %v", hs, err)
		}
		if _, err := in.DLQEntries(ctx, "hh"); !errors.Is(err, ErrUnknownHandler) {
			t.Fatalf("DLQEntries of an unknown handler: %v", err)
		}

		refusals := []struct {
			name, dlq, id string
			want          error
			text          string
		}{
			{"typo in the stream", "shop:{a}:dlg", d.ID, ErrNoDLQ, `(did you mean "shop:{a}:dlq"?)`},
			{"a partition stream", "shop:{a}", d.ID, ErrNoDLQ, `(did you mean "shop:{a}:dlq"?)`},
			{"no such dlq", "shop:{zzz}:dlq", d.ID, ErrNoDLQ, ""},
			{"no such entry", "shop:{a}:dlq", "1-1", ErrNoDLQEntry, ""},
		}
		for _, r := range refusals {
			for _, op := range []func(context.Context, string, string) error{
				func(ctx context.Context, s, id string) error { _, err := in.CheckReplayDLQ(ctx, s, id); return err },
				func(ctx context.Context, s, id string) error { _, err := in.ReplayDLQ(ctx, s, id); return err },
				func(ctx context.Context, s, id string) error { _, err := in.CheckDropDLQ(ctx, s, id); return err },
				func(ctx context.Context, s, id string) error { _, err := in.DropDLQ(ctx, s, id); return err },
			} {
				if err := op(ctx, r.dlq, r.id); !errors.Is(err, r.want) || !strings.Contains(err.Error(), r.text) {
					t.Fatalf("%s: %v, want %v with %q", r.name, err, r.want, r.text)
				}
			}
		}
		if _, err := in.ReplayDLQ(ctx, "shop:{a}:dlq", bare); !errors.Is(err, ErrNothingToReplay) {
			t.Fatalf("replay of an entry without a message: %v", err)
		}

		length := func(s string) int64 { return c.XLen(ctx, s).Val() }
		signals := length(rdb.SignalKey("shop"))
		rep, err := in.CheckReplayDLQ(ctx, "shop:{a}:dlq", d.ID)
		if err != nil || rep.Stream != "shop:{a}" || rep.Published || rep.Entry.ID != d.ID {
			t.Fatalf("CheckReplayDLQ: %+v, %v", rep, err)
		}
		if length("shop:{a}") != 2 || length("shop:{a}:dlq") != 2 || length(rdb.SignalKey("shop")) != signals {
			t.Fatal("CheckReplayDLQ changed something")
		}
		// The reaper took the key out of the index meanwhile: the replay
		// puts it back.
		c.SRem(ctx, rdb.IndexKey("shop"), "a")
		rep, err = in.ReplayDLQ(ctx, "shop:{a}:dlq", d.ID)
		if err != nil || !rep.Published {
			t.Fatalf("ReplayDLQ: %+v, %v", rep, err)
		}
		msgs := c.XRange(ctx, "shop:{a}", "-", "+").Val()
		last := msgs[len(msgs)-1]
		// The message's own fields, its id kept, then what it was: the
		// original entry, the dead-letter entry, the halted handler.
		wantFields := map[string]any{"type": "T", "id": "m-a", "payload": "{}", "published_at": "2024-01-01T00:00:00Z",
			"replay_of": ids[0], "replay_stream": "shop:{a}", "replay_dlq": "shop:{a}:dlq", "replay_dlq_id": d.ID, "replay_handler": "h"}
		if diff := cmp.Diff(wantFields, last.Values); len(msgs) != 3 || diff != "" {
			t.Fatalf("partition after the replay: %d entries, last (-want +got):\n%s", len(msgs), diff)
		}
		if keys, _ := rdb.Partitions(ctx, c, "shop"); len(keys) != 1 || length(rdb.SignalKey("shop")) != signals+1 {
			t.Fatalf("replay did not index (%v) or signal", keys)
		}
		if _, err := in.ReplayDLQ(ctx, "shop:{a}:dlq", d.ID); !errors.Is(err, ErrNoDLQEntry) {
			t.Fatalf("replaying it again: %v", err)
		}

		if got, err := in.CheckDropDLQ(ctx, "shop:{a}:dlq", bare); err != nil || got.ID != bare || length("shop:{a}:dlq") != 1 {
			t.Fatalf("CheckDropDLQ: %+v, %v", got, err)
		}
		if got, err := in.DropDLQ(ctx, "shop:{a}:dlq", bare); err != nil || got.Handler != "g" {
			t.Fatalf("DropDLQ: %+v, %v", got, err)
		}
		if n := c.Exists(ctx, "shop:{a}:dlq").Val(); n != 0 {
			t.Fatal("the drained dead-letter stream is still there")
		}
		if got, err := in.DLQEntries(ctx, ""); err != nil || got == nil || len(got) != 0 {
			t.Fatalf("DLQEntries when none: %#v, %v", got, err)
		}
	})
}

func TestAuditLog(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	in := New(c)
	if got, err := in.AuditLog(ctx, 5); err != nil || got == nil || len(got) != 0 {
		t.Fatalf("empty audit log: %#v, %v", got, err)
	}
	when := time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC)
	e := AuditEntry{Who: "alice@host", When: when, Command: "skip", Handler: "h", Partition: "shop:{a}", Stream: "shop:{a}", EntryID: "1-0", Result: "acked"}
	rec, err := in.Audit(ctx, e)
	if err != nil || rec.ID == "" {
		t.Fatal(rec, err)
	}
	if rec.Op == "" {
		t.Fatal("Audit gave the entry no op")
	}
	e.ID, e.Op = rec.ID, rec.Op
	second, _ := in.Audit(ctx, AuditEntry{Who: "bob", Command: "dlq drop"})
	got, err := in.AuditLog(ctx, 5)
	if err != nil || len(got) != 2 || got[0].ID != second.ID || got[0].When.IsZero() {
		t.Fatalf("audit log: %+v, %v", got, err)
	}
	if diff := cmp.Diff(e, got[1]); diff != "" {
		t.Fatalf("(-recorded +read):\n%s", diff)
	}
}

// JSON uses snake_case names, duration strings and [] for empty lists.
func TestJSON(t *testing.T) {
	tests := []struct {
		name string
		v    any
		want string
	}{
		{"pending entry", PendingEntry{ID: "1-0", Consumer: "w:1", Idle: 1500 * time.Millisecond, Deliveries: 2},
			`{"id":"1-0","consumer":"w:1","deliveries":2,"idle":"1.5s"}`},
		{"partition", PartitionInfo{Category: "c", Key: "k", Stream: "c:{k}", Idle: 90 * time.Second, HeadAge: 2 * time.Hour},
			`{"category":"c","key":"k","stream":"c:{k}","owner":"","generation":0,"pending":0,"lag":0,"halted":false,"paused":false,"idle":"1m30s","head_age":"2h0m0s"}`},
		{"partition never written", PartitionInfo{Idle: -1, HeadAge: -1}, `"idle":null,"head_age":null`},
		{"inspection", Inspection{LeaseTTL: 850 * time.Millisecond, Lanes: lanesOf([]string{"s"})},
			`"streams":[{"stream":"s","exists":false,"length":0,"pending":[]}],"head":null,"lease_ttl":"850ms"}`},
		{"entry", Entry{Stream: "s", ID: "1-0"}, `{"stream":"s","id":"1-0","fields":null}`},
		{"resolution", Resolution{DLQ: "d", DLQEntryID: "2-0"}, `"dlq":"d","dlq_entry_id":"2-0"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := json.Marshal(tt.v)
			if err != nil || !strings.Contains(string(b), tt.want) {
				t.Fatalf("%s, %v; want it to contain %s", b, err, tt.want)
			}
		})
	}
}
