package runtime

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seqby/seqby/internal/redistest"
)

// logRecord is one log record as a test reads it: level, message and
// attributes (the logger's own, from With, and the record's).
type logRecord struct {
	level slog.Level
	msg   string
	attrs map[string]string
}

func (r logRecord) String() string { return fmt.Sprintf("%s %q %v", r.level, r.msg, r.attrs) }

// logCapture is a slog.Handler keeping every record, at every level.
type logCapture struct {
	mu      *sync.Mutex
	records *[]logRecord
	attrs   []slog.Attr
}

func newLogCapture() *logCapture {
	return &logCapture{mu: new(sync.Mutex), records: new([]logRecord)}
}

func (*logCapture) Enabled(context.Context, slog.Level) bool { return true }

func (h *logCapture) Handle(_ context.Context, r slog.Record) error {
	rec := logRecord{level: r.Level, msg: r.Message, attrs: map[string]string{}}
	for _, a := range h.attrs {
		rec.attrs[a.Key] = a.Value.String()
	}
	r.Attrs(func(a slog.Attr) bool { rec.attrs[a.Key] = a.Value.String(); return true })
	h.mu.Lock()
	*h.records = append(*h.records, rec)
	h.mu.Unlock()
	return nil
}

func (h *logCapture) WithAttrs(as []slog.Attr) slog.Handler {
	c := *h
	c.attrs = append(append([]slog.Attr(nil), h.attrs...), as...)
	return &c
}

func (h *logCapture) WithGroup(string) slog.Handler { return h }

// all returns the records so far.
func (h *logCapture) all() []logRecord {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]logRecord(nil), *h.records...)
}

// A normal engine lifetime logs a few lines at INFO, not one per
// partition: two instances start, the first claims every partition (one
// summary line per discovery cycle, "seqby: partitions acquired"), hands
// half over to the second, stops (its successor reclaims the entries it
// had read ahead), and the second stops. The per-partition lines are
// still there at debug, and every line about a partition names its
// handler. Before issue #26 each of the 40 acquires was an INFO line, and
// the reclaim line lacked the handler.
func TestQuietInfoLogs(t *testing.T) {
	const keys = 40
	c, ctx := newRedis(t), ctxT(t)
	p := NewPublisher(c)
	for i := range keys {
		if err := p.Publish(ctx, ev(fmt.Sprintf("k%d", i), 1)); err != nil {
			t.Fatal(err)
		}
	}
	// "slow" holds its first entry in A's handler until the test lets
	// it go; the two after it are read ahead, pending under A, and
	// reclaimed by B once A has stopped.
	for i := 1; i <= 3; i++ {
		if err := p.Publish(ctx, ev("slow", i)); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	applied := map[string]int{}
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	handler := func(_ context.Context, e *testEvent) error {
		if e.Client == "slow" && e.Seq == 1 {
			once.Do(func() { close(entered) })
			<-release
		}
		mu.Lock()
		applied[e.Client]++
		mu.Unlock()
		return nil
	}
	count := func() (n int) {
		mu.Lock()
		defer mu.Unlock()
		for _, v := range applied {
			n += v
		}
		return n
	}
	logs := newLogCapture()
	start := func(owner string) *running {
		opts := fastOptions(owner)
		opts.Logger = slog.New(logs).With("engine", owner)
		opts.SkipEvictionCheck = true // its warning is not what this test counts
		return startEngine(t, c, opts, keyedHandler("quiet", handler))
	}

	a := start("a")
	eventually(t, 20*time.Second, "A applying every key but slow's", func() bool { return count() == keys })
	<-entered
	b := start("b")
	eventually(t, 20*time.Second, "B owning a share", func() bool { return len(b.Status().Partitions) > 0 })
	close(release)
	a.stop()
	eventually(t, 20*time.Second, "B applying slow's entries", func() bool { return count() == keys+3 })
	b.stop()

	recs := logs.all()
	var info []logRecord
	summaries, debugAcquires, reclaims := 0, 0, 0
	for _, r := range recs {
		if r.level >= slog.LevelInfo {
			info = append(info, r)
		}
		_, partitionLine := r.attrs["partition"]
		if _, ok := r.attrs["stream"]; ok {
			partitionLine = true
		}
		if partitionLine && r.attrs["handler"] != "quiet" {
			t.Errorf("a line about a partition without its handler: %v", r)
		}
		switch {
		case r.msg == "seqby: partitions acquired":
			summaries++
			if r.level != slog.LevelInfo || r.attrs["handler"] != "quiet" || r.attrs["acquired"] == "" || r.attrs["owned"] == "" {
				t.Errorf("summary line %v: want INFO with handler, acquired, owned", r)
			}
		case r.msg == "seqby: acquired":
			debugAcquires++
			if r.level != slog.LevelDebug {
				t.Errorf("per-partition acquire line %v: want DEBUG", r)
			}
		case strings.HasPrefix(r.msg, "seqby: reclaimed pending entries"):
			reclaims++
		}
	}
	var text strings.Builder
	for _, r := range info {
		fmt.Fprintln(&text, r)
	}
	// A: running, one or two summaries, the handover, stopped; B:
	// running, a summary or two (its share, then the rest), the reclaim,
	// stopped. Far fewer than the 41 partitions.
	if len(info) > 16 {
		t.Errorf("%d lines at INFO or above for %d partitions, want a few:\n%s", len(info), keys+1, text.String())
	}
	if summaries == 0 || debugAcquires < keys+1 || reclaims == 0 {
		t.Errorf("%d summaries, %d per-partition acquire lines at debug, %d reclaim lines; want some, at least %d, some:\n%s",
			summaries, debugAcquires, reclaims, keys+1, text.String())
	}
	if testing.Verbose() {
		t.Log("\n" + text.String())
	}
}

// A Redis outage fails every lease's renew at each heartbeat until the
// leases are lost: one line per handler and heartbeat says so, with how
// many failed, where there was one per partition (ten here, each
// heartbeat) before issue #26.
func TestRenewFailuresLoggedPerHandler(t *testing.T) {
	const keys = 10
	s := redistest.New(t)
	c := redis.NewClient(&redis.Options{Addr: s.Addr, ContextTimeoutEnabled: true, MaxRetries: -1})
	t.Cleanup(func() { c.Close() })
	ctx := ctxT(t)
	p := NewPublisher(c)
	for i := range keys {
		if err := p.Publish(ctx, ev(fmt.Sprintf("k%d", i), 1)); err != nil {
			t.Fatal(err)
		}
	}
	logs := newLogCapture()
	opts := fastOptions("renew")
	opts.Logger = slog.New(logs)
	r := startEngine(t, c, opts, keyedHandler("renew", func(context.Context, *testEvent) error { return nil }))
	eventually(t, 20*time.Second, "every partition owned", func() bool { return len(r.Status().Partitions) == keys })

	s.Kill()
	var failures []logRecord
	eventually(t, 20*time.Second, "two heartbeats' renew failures", func() bool {
		failures = failures[:0]
		for _, rec := range logs.all() {
			if rec.msg == "seqby: lease renew failed; will retry" {
				failures = append(failures, rec)
			}
		}
		return len(failures) >= 2
	})
	if err := s.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	for i, rec := range failures {
		if rec.attrs["handler"] != "renew" || rec.attrs["stream"] == "" || rec.attrs["err"] == "" {
			t.Errorf("%v: want the handler, a stream and the error", rec)
		}
		// The first heartbeat after the kill finds every lease still
		// held here; later ones have fewer, as leases are lost.
		if i == 0 && rec.attrs["failed"] != fmt.Sprint(keys) {
			t.Errorf("the first failed heartbeat's line %v: want failed=%d, every partition in one line", rec, keys)
		}
	}
}
