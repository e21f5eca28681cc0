package maintenance

import (
	"sync"
	"testing"
	"time"

	"github.com/seqby/seqby/internal/logsink"
	"github.com/seqby/seqby/runtime/internal/membership"
	"github.com/seqby/seqby/runtime/internal/rdb"
)

// A partition with work that nobody owns is marked, reported once it has
// been unowned for UnownedAfter (Report, called without the check's
// lock), and cleared once an owner takes it (Clear); a partition this
// instance owns is never looked at.
func TestUnownedReportedThenCleared(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	stream := rdb.PartitionStream("order", "a")
	if err := rdb.Publish(ctx, c, "order", "a", stream, 100, []any{"n", "1"}, rdb.Once{}); err != nil {
		t.Fatal(err)
	}
	var logs logsink.Buffer
	cfg := testConfig(c, "u1", &logs)
	cfg.LeaseTTL, cfg.DiscoveryInterval = 100*time.Millisecond, 10*time.Millisecond
	var mu sync.Mutex
	var reported []membership.Fault
	var cleared []string
	var m *Maintenance
	unlocked := func() {
		if !m.mu.TryLock() {
			t.Error("a callback ran under the check's lock")
			return
		}
		m.mu.Unlock()
	}
	cfg.Owned = func(ids []string) ([]bool, int64) {
		unlocked()
		owned := make([]bool, len(ids))
		for i, id := range ids {
			owned[i] = id == "mine"
		}
		return owned, 1
	}
	cfg.Report = func(id string, f membership.Fault) {
		unlocked()
		mu.Lock()
		defer mu.Unlock()
		if id != "a" {
			t.Errorf("reported %s", id)
		}
		reported = append(reported, f)
	}
	cfg.Clear = func(id string) {
		unlocked()
		mu.Lock()
		defer mu.Unlock()
		cleared = append(cleared, id)
	}
	m = New(cfg)
	unit := func(id, key string) Unit {
		s := rdb.PartitionStream("order", key)
		return Unit{ID: id, Ref: rdb.PartitionLease(s, "h"), Key: key, Cats: []string{"order"},
			Lanes: []string{s, rdb.BackfillStream("order", key, rdb.DefaultBackfillSuffix)}}
	}
	units := []Unit{unit("a", "a"), unit("mine", "m")}
	count := func() (int, int) {
		mu.Lock()
		defer mu.Unlock()
		return len(reported), len(cleared)
	}
	start := time.Now()
	eventually(t, 10*time.Second, "the unowned partition reported", func() bool {
		m.CheckUnowned(ctx, "h", units)
		r, _ := count()
		return r > 0
	})
	if since := time.Since(start); since < m.UnownedAfter() {
		t.Fatalf("reported after %v, before UnownedAfter %v", since, m.UnownedAfter())
	}
	marks, _ := m.Checked("h")
	f := reported[0]
	if marks != 1 || f.Kind != membership.FaultUnowned || f.Handler != "h" || f.Key != "a" || f.Stream != stream || f.Category != "order" {
		t.Fatalf("%d marks, fault %+v", marks, f)
	}
	// Reported once, however many checks follow.
	for range 3 {
		time.Sleep(cfg.LeaseTTL)
		m.CheckUnowned(ctx, "h", units)
	}
	if r, _ := count(); r != 1 {
		t.Fatalf("reported %d times, want once", r)
	}
	if _, err := rdb.Acquire(ctx, c, units[0].Ref, "other~1", time.Minute); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the partition cleared", func() bool {
		m.CheckUnowned(ctx, "h", units)
		_, n := count()
		return n == 1
	})
	if marks, _ := m.Checked("h"); marks != 0 || cleared[0] != "a" {
		t.Fatalf("%d marks left, cleared %v", marks, cleared)
	}
}

// The check runs at most once per LeaseTTL per handler, and Reset (a new
// Run) forgets the marks.
func TestUnownedOncePerLeaseTTL(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	stream := rdb.PartitionStream("order", "a")
	if err := rdb.Publish(ctx, c, "order", "a", stream, 100, []any{"n", "1"}, rdb.Once{}); err != nil {
		t.Fatal(err)
	}
	var logs logsink.Buffer
	cfg := testConfig(c, "u1", &logs)
	cfg.LeaseTTL = time.Minute
	m := New(cfg)
	u := Unit{ID: "a", Ref: rdb.PartitionLease(stream, "h"), Key: "a", Cats: []string{"order"}, Lanes: []string{stream}}
	m.CheckUnowned(ctx, "h", []Unit{u})
	marks, at := m.Checked("h")
	if marks != 1 || at.IsZero() {
		t.Fatalf("after a check: %d marks, checked at %v", marks, at)
	}
	m.CheckUnowned(ctx, "h", nil) // within LeaseTTL: not run, so the mark stays
	if again, at2 := m.Checked("h"); again != 1 || !at2.Equal(at) {
		t.Fatalf("a second check within LeaseTTL ran: %d marks, checked at %v (was %v)", again, at2, at)
	}
	m.Reset()
	if marks, at := m.Checked("h"); marks != 0 || !at.IsZero() {
		t.Fatalf("after Reset: %d marks, checked at %v", marks, at)
	}
}
