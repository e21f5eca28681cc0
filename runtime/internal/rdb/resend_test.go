package rdb

import (
	"context"
	"errors"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seqby/seqby/internal/redistest"
)

// lossy is a client of c's server whose calls that run the named script
// lose their reply once (go-redis then sends them again).
func lossy(t *testing.T, c *redis.Client, script string) (*redis.Client, *redistest.LostReply) {
	t.Helper()
	l := &redistest.LostReply{}
	lc := redis.NewClient(&redis.Options{Addr: c.Options().Addr, Dialer: l.Dialer(nil)})
	t.Cleanup(func() { lc.Close() })
	// Loaded first: a NOSCRIPT reply lost would test nothing.
	if err := LoadScripts(ctxT(t), c); err != nil {
		t.Fatal(err)
	}
	l.Arm(func(args []string) bool { return len(args) > 1 && ScriptName(args[1]) == script }, redistest.EOF, 1)
	return lc, l
}

// A pm state save that Redis runs twice answers as the first run did:
// saved, at the version it wrote. It used to answer a conflict, on which
// a non-sequential pm applies the event again to the state that holds it.
func TestSaveStateRunTwice(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	lc, l := lossy(t, c, "save_state")
	saved, stored, err := SaveState(ctx, lc, StateSave{PM: "pm", Correlation: "v", Data: []byte(`{"n":1}`), ExpectVersion: 0})
	if l.Lost() != 1 {
		t.Fatalf("lost %d replies, want 1", l.Lost())
	}
	if err != nil || !saved {
		t.Fatalf("a save run twice: saved %v, stored %d, %v; want saved", saved, stored, err)
	}
	// Another writer's save of the same version is still a conflict.
	saved, stored, err = SaveState(ctx, c, StateSave{PM: "pm", Correlation: "v", Data: []byte(`{"n":2}`), ExpectVersion: 0})
	if err != nil || saved || stored != 1 {
		t.Fatalf("a second writer from version 0: saved %v, stored %d, %v; want a conflict at 1", saved, stored, err)
	}
}

// A cold release that Redis runs twice answers as the first run did,
// released, where it answered fenced, which the owner reports as a lost
// lease (a warning, the lease-lost and fenced metrics). A lease gone while
// its lanes have work is still fenced.
func TestReleaseColdRunTwice(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	cold := func(key string) string {
		stream := PartitionStream("order", key)
		c.XAdd(ctx, &redis.XAddArgs{Stream: stream, Values: []any{"n", 1}})
		c.XTrimMaxLen(ctx, stream, 0)
		last := c.XInfoStream(ctx, stream).Val().LastGeneratedID
		eventually(t, 5*time.Second, "the Redis clock to pass the last entry", func() bool {
			return c.Time(ctx).Val().UnixMilli() > idMillis(last)+1
		})
		return stream
	}
	stream := cold("k1")
	lc, l := lossy(t, c, "release_cold")
	lease, err := Acquire(ctx, c, PartitionLease(stream, "g"), "o~1", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	released, err := lease.ReleaseCold(ctx, lc, time.Millisecond, []string{stream})
	if l.Lost() != 1 || err != nil || !released {
		t.Fatalf("a cold release run twice (lost %d): %v, %v; want released", l.Lost(), released, err)
	}
	// The lease expired, and the partition has work: fenced.
	warm := PartitionStream("order", "k2")
	lease, err = Acquire(ctx, c, PartitionLease(warm, "g"), "o~1", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	c.XAdd(ctx, &redis.XAddArgs{Stream: warm, Values: []any{"n", 1}})
	c.Del(ctx, lease.Ref.Key)
	if _, err := lease.ReleaseCold(ctx, c, time.Millisecond, []string{warm}); !errors.Is(err, ErrFenced) {
		t.Fatalf("ReleaseCold of a lost lease over work: %v, want ErrFenced", err)
	}
}

// An admitted age stored twice (its reply lost, resent) stores the same
// age once, the member's end no earlier.
func TestStoreAdmitAgeRunTwice(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	lc, l := lossy(t, c, "admit_age")
	if err := StoreAdmitAge(ctx, lc, "h", "o~1", 80*time.Millisecond, time.Minute); err != nil || l.Lost() != 1 {
		t.Fatalf("a store run twice (lost %d): %v; want stored", l.Lost(), err)
	}
	if a, err := AdmitAge(ctx, c, "h"); err != nil || a != 80*time.Millisecond {
		t.Fatalf("AdmitAge: %v, %v; want 80ms", a, err)
	}
	if ms, _, err := AdmitAgeRecords(ctx, c, "h"); err != nil || len(ms) != 1 || ms[0] != "80|o~1" {
		t.Fatalf("the records are %v (%v); want the one 80|o~1", ms, err)
	}
}

// The rule that every call may run twice lists every script, with why it
// is safe to resend, in this package's doc and in docs/runtime.md: a new
// script is not done until both say so.
func TestResendListsNameEveryScript(t *testing.T) {
	files, err := luaFiles.ReadDir("lua")
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, f := range files {
		if !f.IsDir() {
			want = append(want, f.Name())
		}
	}
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile("../../../docs/runtime.md")
	if err != nil {
		t.Fatal(err)
	}
	section := func(text, from, to string) string {
		_, after, ok := strings.Cut(text, from)
		if !ok {
			t.Fatalf("no section %q", from)
		}
		before, _, _ := strings.Cut(after, to)
		return before
	}
	for _, list := range []struct {
		name, text string
		row        *regexp.Regexp
	}{
		{"doc.go", section(string(doc), "# Every call may run twice", "and the calls sent from Go"), regexp.MustCompile(`(?m)^//\t(\S+\.lua) +\S`)},
		{"docs/runtime.md", section(string(md), "## Every call may run twice", "| call from Go"), regexp.MustCompile("(?m)^\\| `(\\S+\\.lua)` \\| \\S")},
	} {
		var got []string
		for _, m := range list.row.FindAllStringSubmatch(list.text, -1) {
			got = append(got, m[1])
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s lists %v, want every script in lua/ in order: %v", list.name, got, want)
		}
	}
}

// An idempotent publish sends its append script by SHA inside MULTI and
// in pipelines, where no EVAL fallback runs: a server that lost its
// script cache (SCRIPT FLUSH, a restart) answers NOSCRIPT, and the
// publish loads the script and sends again, storing each entry once.
func TestPublishAfterScriptFlush(t *testing.T) {
	redistest.Topologies(t, func(t *testing.T, c redis.UniversalClient) {
		ctx := ctxT(t)
		flush := func() {
			t.Helper()
			var err error
			if cc, ok := c.(*redis.ClusterClient); ok {
				err = cc.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error { return n.ScriptFlush(ctx).Err() })
			} else {
				err = c.ScriptFlush(ctx).Err()
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		stream := PartitionStream("order", "k")
		flush()
		once := Once{ID: "m-1", Window: time.Minute}
		if err := Publish(ctx, c, "order", "k", stream, 100, []any{"n", "1"}, once); err != nil {
			t.Fatalf("publish after SCRIPT FLUSH: %v", err)
		}
		flush()
		entries := []BatchEntry{
			{Category: "order", Key: "k", Stream: stream, ID: "m-2", Partitioned: true, Fields: []any{"n", "2"}},
			{Category: "order", Key: "k", Stream: stream, ID: "m-3", Partitioned: true, Fields: []any{"n", "3"}},
		}
		if stored, err := PublishBatch(ctx, c, entries, 100, time.Minute); err != nil || !stored[0] || !stored[1] {
			t.Fatalf("batch after SCRIPT FLUSH: %v %v", stored, err)
		}
		xs, err := c.XRange(ctx, stream, "-", "+").Result()
		if err != nil || len(xs) != 3 {
			t.Fatalf("the stream holds %d entries (%v), want 3, each once", len(xs), err)
		}
	})
}

// A fault report, an owned count and an audit append whose replies were
// lost (Redis ran them, go-redis resent them) leave what one run leaves:
// one record each, one audit entry.
func TestRecordsRunTwice(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	lc, l := lossy(t, c, "record")
	fs := map[string][]FaultReport{"h": {{Kind: "unowned", Handler: "h", Key: "a"}}}
	if err := ReportFaults(ctx, lc, "w1", fs, nil, time.Minute); err != nil || l.Lost() != 1 {
		t.Fatalf("a fault report whose reply was lost (lost %d): %v", l.Lost(), err)
	}
	got, err := Faults(ctx, c)
	if err != nil || len(got) != 1 || got[0].Owner != "w1" || got[0].Key != "a" {
		t.Fatalf("Faults = %+v, %v; want w1's one fault", got, err)
	}
	lc, l = lossy(t, c, "audit")
	id, err := AppendAudit(ctx, lc, NewOp(), []any{"who", "alice"})
	if err != nil || l.Lost() != 1 {
		t.Fatalf("an audit append whose reply was lost (lost %d): %v", l.Lost(), err)
	}
	if n := c.XLen(ctx, AuditKey).Val(); n != 1 || c.XRange(ctx, AuditKey, "-", "+").Val()[0].ID != id {
		t.Fatalf("the audit stream holds %d entries, want the one answered (%s)", n, id)
	}
}
