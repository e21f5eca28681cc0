package rdb

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"
	"github.com/seqby/seqby/internal/redistest"
)

// The audit stream keeps the newest entries, listed newest first, and is
// capped (approximately) at AuditMaxLen.
func TestAudit(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	if got, err := AuditLog(ctx, c, 10); err != nil || len(got) != 0 {
		t.Fatalf("log of a missing stream: %v, %v; want none", got, err)
	}
	var ids []string
	for i := range 3 {
		id, err := AppendAudit(ctx, c, NewOp(), []any{"who", "op", "n", fmt.Sprint(i)})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	got, err := AuditLog(ctx, c, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].ID != ids[2] || got[1].ID != ids[1] || got[0].Fields["n"] != "2" {
		t.Fatalf("newest two: %+v, want %v then %v", got, ids[2], ids[1])
	}
	// One entry per op: appended again (a resend), it answers the first
	// entry's id and appends nothing.
	op := NewOp()
	first, err := AppendAudit(ctx, c, op, []any{"who", "once"})
	if err != nil {
		t.Fatal(err)
	}
	if again, err := AppendAudit(ctx, c, op, []any{"who", "once"}); err != nil || again != first || c.XLen(ctx, AuditKey).Val() != 4 {
		t.Fatalf("the op appended again: %q, %v, %d entries; want %q, 4 entries", again, err, c.XLen(ctx, AuditKey).Val(), first)
	}
	// Other actions in between: still found, and only its own entry.
	for range 50 {
		if _, err := AppendAudit(ctx, c, NewOp(), []any{"who", "other"}); err != nil {
			t.Fatal(err)
		}
	}
	if again, err := AppendAudit(ctx, c, op, []any{"who", "once"}); err != nil || again != first || c.XLen(ctx, AuditKey).Val() != 54 {
		t.Fatalf("the op appended again after others: %q, %v, %d entries; want %q, 54 entries", again, err, c.XLen(ctx, AuditKey).Val(), first)
	}
	if e := c.XRange(ctx, AuditKey, first, first).Val(); len(e) != 1 || e[0].Values["op"] != op {
		t.Fatalf("the entry %s holds %v, want its op %s", first, e, op)
	}
	if n := c.Keys(ctx, "*__op__*").Val(); len(n) != 0 {
		t.Fatalf("keys %v beside the audit stream, want none", n)
	}
	// The cap: MAXLEN ~ trims whole nodes, so the length stays within a
	// node (100 entries by default) of it.
	p := c.Pipeline()
	for range AuditMaxLen + 500 {
		p.XAdd(ctx, &redis.XAddArgs{Stream: AuditKey, MaxLen: AuditMaxLen, Approx: true, Values: []any{"who", "load"}})
	}
	if _, err := p.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := AppendAudit(ctx, c, NewOp(), []any{"who", "last"}); err != nil {
		t.Fatal(err)
	}
	if n := c.XLen(ctx, AuditKey).Val(); n < AuditMaxLen || n > AuditMaxLen+100 {
		t.Fatalf("audit stream holds %d entries, want about %d", n, AuditMaxLen)
	}
}

func TestParseStreams(t *testing.T) {
	tests := []struct {
		name, in      string
		dlq           bool
		category, key string
		ok            bool
	}{
		{"partition", "order:{client-1}", false, "order", "client-1", true},
		{"category with colons", "shop:eu:{a}", false, "shop:eu", "a", true},
		{"a lane is not a partition", "order:{a}:backfill", false, "", "", false},
		{"no braces", "order", false, "", "", false},
		{"empty key", "order:{}", false, "", "", false},
		{"no category", ":{a}", false, "", "", false},
		{"dlq", "order:{a}:dlq", true, "order", "a", true},
		{"a partition is not a dlq", "order:{a}", true, "", "", false},
		{"dlq of a lane", "order:{a}:backfill:dlq", true, "", "", false},
		{"bookkeeping", "{order}:__groups__", false, "", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			parse := ParsePartitionStream
			if tt.dlq {
				parse = ParseDLQStream
			}
			cat, key, ok := parse(tt.in)
			if cat != tt.category || key != tt.key || ok != tt.ok {
				t.Fatalf("parse %q = %q, %q, %v; want %q, %q, %v", tt.in, cat, key, ok, tt.category, tt.key, tt.ok)
			}
		})
	}
}

// Registry and DLQStreams find their keys on every master of a cluster.
func TestRegistryAndDLQStreams(t *testing.T) {
	redistest.Topologies(t, func(t *testing.T, c redis.UniversalClient) {
		ctx := ctxT(t)
		for _, r := range []struct{ cat, group string }{{"order", "billing"}, {"order", "audit"}, {"payment", "billing"}, {"note", "log"}} {
			if _, err := RegisterGroup(ctx, c, r.cat, r.group, false); err != nil {
				t.Fatal(err)
			}
		}
		for _, s := range []string{DLQStream("order", "a"), DLQStream("order", "b"), DLQStream("payment", "z")} {
			c.XAdd(ctx, &redis.XAddArgs{Stream: s, Values: []any{"type", "T"}})
		}
		c.Set(ctx, "order:{c}:dlq", "not a stream", 0)
		c.XAdd(ctx, &redis.XAddArgs{Stream: "order:{a}", Values: []any{"type", "T"}})
		reg, err := Registry(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		want := map[string][]string{"order": {"audit", "billing"}, "payment": {"billing"}, "note": {"log"}}
		if diff := cmp.Diff(want, reg); diff != "" {
			t.Errorf("registry (-want +got):\n%s", diff)
		}
		dlqs, err := DLQStreams(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{"order:{a}:dlq", "order:{b}:dlq", "payment:{z}:dlq"}, dlqs); diff != "" {
			t.Errorf("dead-letter streams (-want +got):\n%s", diff)
		}
	})
}

// Deleting a DLQ entry reports whether it was there and removes the
// stream with its last entry; StreamEntries pages through long streams.
func TestDLQEntries(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	dlq := DLQStream("order", "a")
	p := c.Pipeline()
	for i := range 1001 {
		p.XAdd(ctx, &redis.XAddArgs{Stream: dlq, ID: fmt.Sprintf("%d-0", i+1), Values: []any{"n", fmt.Sprint(i)}})
	}
	if _, err := p.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	es, err := StreamEntries(ctx, c, dlq)
	if err != nil || len(es) != 1001 || es[1000].ID != "1001-0" {
		t.Fatalf("StreamEntries: %d entries, %v", len(es), err)
	}
	c.XTrimMaxLen(ctx, dlq, 2)
	steps := []struct {
		id          string
		deleted     bool
		streamAfter bool
	}{
		{"1000-0", true, true},
		{"1000-0", false, true},
		{"5-0", false, true},
		{"1001-0", true, false},
		{"1001-0", false, false},
	}
	for _, s := range steps {
		got, err := DeleteDLQEntry(ctx, c, dlq, s.id)
		if err != nil || got != s.deleted {
			t.Fatalf("delete %s: %v, %v; want %v", s.id, got, err, s.deleted)
		}
		if n := c.Exists(ctx, dlq).Val(); (n == 1) != s.streamAfter {
			t.Fatalf("after deleting %s the stream exists: %v, want %v", s.id, n == 1, s.streamAfter)
		}
	}
}

func TestMessageFields(t *testing.T) {
	tests := []struct {
		name string
		in   map[string]string
		want []any
	}{
		{"dead-letter copy", map[string]string{"payload": "{}", "type": "T", "id": "m", "published_at": "now", "traceparent": "00-x",
			DLQFieldStream: "s", DLQFieldEntryID: "1-0", DLQFieldHandler: "h", DLQFieldReason: "r"},
			[]any{"type", "T", "id", "m", "payload", "{}", "published_at", "now", "traceparent", "00-x"}},
		{"head deleted before the move", map[string]string{DLQFieldStream: "s", DLQFieldEntryID: "1-0"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, MessageFields(tt.in)); diff != "" {
				t.Fatalf("(-want +got):\n%s", diff)
			}
		})
	}
}

// LanesStats reads pending and lag per group, counts the lag itself
// when Redis cannot tell it (entries deleted from the middle), and finds
// each lane's head: the first pending entry, else the first not
// delivered.
func TestLanesStats(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	add := func(s string, n int) []string {
		var ids []string
		for range n {
			ids = append(ids, c.XAdd(ctx, &redis.XAddArgs{Stream: s, Values: []any{"k", "v"}}).Val())
		}
		return ids
	}
	read := func(s string, n int64) {
		if _, err := ReadGroup(ctx, c, s, "g", "w:1", ">", n, -1); err != nil {
			t.Fatal(err)
		}
	}
	// fresh: 3 entries, g never read.
	fresh := add("o:{fresh}", 3)
	// read: 5 entries, 2 read (1 acked, 1 pending), 3 undelivered.
	ids := add("o:{read}", 5)
	CreateGroup(ctx, c, "o:{read}", "g", false)
	read("o:{read}", 2)
	c.XAck(ctx, "o:{read}", "g", ids[0])
	// holed: 5 entries, 1 read, one undelivered entry deleted: Redis
	// reports no lag, 3 remain undelivered.
	holed := add("o:{holed}", 5)
	CreateGroup(ctx, c, "o:{holed}", "g", false)
	read("o:{holed}", 1)
	c.XDel(ctx, "o:{holed}", holed[2])
	// other: only another group.
	other := add("o:{other}", 1)
	CreateGroup(ctx, c, "o:{other}", "h", false)
	// behind: 3 entries, 1 read and acked: the head is behind the cursor.
	behind := add("o:{behind}", 3)
	CreateGroup(ctx, c, "o:{behind}", "g", false)
	read("o:{behind}", 1)
	c.XAck(ctx, "o:{behind}", "g", behind[0])
	// done: every entry acked: no head.
	done := add("o:{done}", 2)
	CreateGroup(ctx, c, "o:{done}", "g", false)
	read("o:{done}", 2)
	c.XAck(ctx, "o:{done}", "g", done...)

	got, err := LanesStats(ctx, c, "g", []string{"o:{fresh}", "o:{read}", "o:{holed}", "o:{other}", "o:{none}", "o:{behind}", "o:{done}"})
	if err != nil {
		t.Fatal(err)
	}
	want := []LaneStats{
		{Stream: "o:{fresh}", Exists: true, Length: 3, LastID: fresh[2], Lag: 3, HeadID: fresh[0]},
		{Stream: "o:{read}", Exists: true, Length: 5, LastID: ids[4], Group: true, Pending: 1, Lag: 3, HeadID: ids[1]},
		{Stream: "o:{holed}", Exists: true, Length: 4, LastID: holed[4], Group: true, Pending: 1, Lag: 3, HeadID: holed[0]},
		{Stream: "o:{other}", Exists: true, Length: 1, LastID: other[0], Lag: 1, HeadID: other[0]},
		{Stream: "o:{none}"},
		{Stream: "o:{behind}", Exists: true, Length: 3, LastID: behind[2], Group: true, Lag: 2, HeadID: behind[1]},
		{Stream: "o:{done}", Exists: true, Length: 2, LastID: done[1], Group: true},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
	c.Set(ctx, "o:{str}", "x", 0)
	if _, err := LanesStats(ctx, c, "g", []string{"o:{str}"}); err == nil {
		t.Fatal("a key of another type: no error")
	}
	vals, err := Strings(ctx, c, []string{"o:{str}", "o:{missing}"})
	if err != nil || !slices.Equal(vals, []string{"x", ""}) {
		t.Fatalf("Strings: %q, %v", vals, err)
	}
}

func TestIsPartition(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	c.SAdd(ctx, IndexKey("o"), "a")
	c.SAdd(ctx, ReapingKey("o"), "b")
	for key, want := range map[string]bool{"a": true, "b": true, "c": false} {
		if got, err := IsPartition(ctx, c, "o", key); err != nil || got != want {
			t.Errorf("IsPartition(o, %s) = %v, %v; want %v", key, got, err, want)
		}
	}
}

// CheckHead refuses exactly where ResolveHead refuses, changing nothing.
func TestCheckHeadAgreesWithResolveHead(t *testing.T) {
	tests := []struct {
		name  string
		setup func(ctx context.Context, c redis.UniversalClient, r *HaltRecord, raw *string, ids []string)
		want  error // nil: both act
	}{
		{"halted head", func(context.Context, redis.UniversalClient, *HaltRecord, *string, []string) {}, nil},
		{"lease held by the halted owner", func(ctx context.Context, c redis.UniversalClient, r *HaltRecord, _ *string, _ []string) {
			c.Set(ctx, r.LeaseKey, r.Token, 0)
		}, nil},
		{"record changed", func(_ context.Context, _ redis.UniversalClient, _ *HaltRecord, raw *string, _ []string) {
			*raw += " "
		}, ErrResolveNotHalted},
		{"another owner retrying", func(ctx context.Context, c redis.UniversalClient, r *HaltRecord, _ *string, _ []string) {
			c.Set(ctx, r.LeaseKey, "w2:9", 0)
		}, ErrResolveRetrying},
		{"halted owner attempting the head", func(ctx context.Context, c redis.UniversalClient, r *HaltRecord, _ *string, _ []string) {
			c.Set(ctx, r.LeaseKey, r.Token, 0)
			c.HSet(ctx, r.RecordKey(), MetaAttempt, r.Token+" "+strconv.FormatInt(time.Now().Add(time.Hour).UnixMilli(), 10))
		}, ErrResolveAttempting},
		// A mark its owner failed to delete, no longer renewed, ends at its
		// expiry even while the owner keeps the lease.
		{"attempt mark expired", func(ctx context.Context, c redis.UniversalClient, r *HaltRecord, _ *string, _ []string) {
			c.Set(ctx, r.LeaseKey, r.Token, 0)
			c.HSet(ctx, r.RecordKey(), MetaAttempt, r.Token+" "+strconv.FormatInt(time.Now().Add(-time.Second).UnixMilli(), 10))
		}, nil},
		{"attempt mark of an earlier token", func(ctx context.Context, c redis.UniversalClient, r *HaltRecord, _ *string, _ []string) {
			c.Set(ctx, r.LeaseKey, r.Token, 0)
			c.HSet(ctx, r.RecordKey(), MetaAttempt, "w1:0 "+strconv.FormatInt(time.Now().Add(time.Hour).UnixMilli(), 10))
		}, nil},
		{"head acked", func(ctx context.Context, c redis.UniversalClient, r *HaltRecord, _ *string, _ []string) {
			c.XAck(ctx, r.Stream, r.Handler, r.EntryID)
		}, ErrResolveStale},
		{"not the head", func(_ context.Context, _ redis.UniversalClient, r *HaltRecord, _ *string, ids []string) {
			r.EntryID = ids[1]
		}, ErrResolveNotHead},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, ctx := newRedis(t), ctxT(t)
			stream := PartitionStream("o", "a")
			var ids []string
			for range 2 {
				ids = append(ids, c.XAdd(ctx, &redis.XAddArgs{Stream: stream, Values: []any{"type", "T"}}).Val())
			}
			CreateGroup(ctx, c, stream, "g", false)
			if _, err := ReadGroup(ctx, c, stream, "g", "w1:1", ">", 2, -1); err != nil {
				t.Fatal(err)
			}
			r := HaltRecord{Handler: "g", Partition: stream, Category: "o", Key: "a", Stream: stream, Streams: []string{stream},
				EntryID: ids[0], Owner: "w1", Token: "w1:1", LeaseKey: LeaseKey(stream, "g")}
			b, _ := json.Marshal(r)
			c.HSet(ctx, r.RecordKey(), MetaHalt, string(b))
			raw := string(b)
			tt.setup(ctx, c, &r, &raw, ids)
			before := snapshot(ctx, c, r)
			err := CheckHead(ctx, c, "g", r, raw)
			if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
				t.Fatalf("CheckHead: %v, want %v", err, tt.want)
			}
			if after := snapshot(ctx, c, r); after != before {
				t.Fatalf("CheckHead changed something:\nbefore %s\nafter  %s", before, after)
			}
			_, err = ResolveHead(ctx, c, "g", r, raw, "", nil)
			if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
				t.Fatalf("ResolveHead: %v, want %v like CheckHead", err, tt.want)
			}
		})
	}
}

// snapshot is what a resolution would change: the record, the lease and
// the pending list.
func snapshot(ctx context.Context, c redis.UniversalClient, r HaltRecord) string {
	rec, _ := c.HGet(ctx, r.RecordKey(), MetaHalt).Result()
	lease, _ := c.Get(ctx, r.LeaseKey).Result()
	p, _ := c.XPending(ctx, r.Stream, r.Handler).Result()
	return fmt.Sprintf("record %q lease %q pending %+v", rec, lease, p)
}
