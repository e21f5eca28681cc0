package discovery

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/seqby/seqby/internal/logsink"
	"github.com/seqby/seqby/runtime/internal/rdb"
	"github.com/seqby/seqby/runtime/internal/wake"
)

// A partition an acquire found cold is skipped until a signal for its key
// comes after the acquire's mark, or until coldRecheck passed; pruneCold
// forgets the marks older than coldRecheck.
func TestColdMarks(t *testing.T) {
	w := wake.New(wake.Config{})
	d := New(Config{Wake: w})
	d.markCold("order:{a}", []string{"order"}, "a", w.Mark("order", "a"))
	w.Poke("order", "b") // another key's signal changes nothing
	if d.warm("order:{a}") {
		t.Fatal("a cold partition must be skipped before any signal for its key")
	}
	if !d.warm("order:{b}") {
		t.Fatal("an unmarked partition must be tried")
	}
	w.Poke("order", "a")
	if !d.warm("order:{a}") || d.ColdMarks() != 0 {
		t.Fatalf("signalled after the mark: warm and forgotten, %d marks left", d.ColdMarks())
	}

	// A signal before the acquire's mark does not end it.
	w.Poke("pm", "c")
	d.markCold("pm:c", []string{"order", "pm"}, "c", w.Mark("order", "c"))
	if d.warm("pm:c") {
		t.Fatal("a signal sent before the acquire must not end its cold mark")
	}
	w.Poke("pm", "c") // any of the unit's categories
	if !d.warm("pm:c") {
		t.Fatal("a signal in the pm's second category must end the mark")
	}

	// Time ends a mark too, and pruneCold drops the old ones.
	d.markCold("order:{d}", []string{"order"}, "d", w.Mark("order", "d"))
	d.markCold("order:{e}", []string{"order"}, "e", w.Mark("order", "e"))
	d.markCold("order:{f}", []string{"order"}, "f", w.Mark("order", "f"))
	d.mu.Lock()
	for _, id := range []string{"order:{d}", "order:{e}"} {
		m := d.cold[id]
		m.at = time.Now().Add(-coldRecheck)
		d.cold[id] = m
	}
	d.mu.Unlock()
	if !d.warm("order:{d}") {
		t.Fatal("a mark older than coldRecheck must end")
	}
	d.pruneCold()
	if n := d.ColdMarks(); n != 1 || d.warm("order:{f}") {
		t.Fatalf("%d marks after pruning, want order:{f}'s alone", n)
	}
}

// A category above PartitionWarnThreshold is warned about once as it
// crosses it, and again only after it fell below; Large lists it while
// above.
func TestWarnSize(t *testing.T) {
	var logs logsink.Buffer
	d := New(Config{PartitionWarnThreshold: 2, Log: slog.New(slog.NewTextHandler(&logs, nil))})
	warnings := func() int { return strings.Count(logs.String(), "category has many partitions") }
	if d.Large() != nil {
		t.Fatal("Large before any cycle must be nil")
	}
	d.warnSize("order", 2)
	d.warnSize("order", 3)
	d.warnSize("order", 4)
	if got := d.Large(); got["order"] != 4 || len(got) != 1 || warnings() != 1 {
		t.Fatalf("Large %v, %d warnings; want order: 4 and one warning", got, warnings())
	}
	d.warnSize("order", 1)
	if d.Large() != nil {
		t.Fatal("under the threshold: Large must be nil again")
	}
	d.warnSize("order", 3)
	if warnings() != 2 {
		t.Fatalf("%d warnings after the second crossing, want 2", warnings())
	}
}

// A failed acquire is logged at once, then at most once per
// acquireLogEvery per handler with the failures not logged meanwhile; a
// lease held by another owner is silent.
func TestAcquireFailedRateLimit(t *testing.T) {
	var logs logsink.Buffer
	d := New(Config{Log: slog.New(slog.NewTextHandler(&logs, nil))})
	lines := func() int { return strings.Count(logs.String(), "acquiring a lease failed") }
	d.acquireFailed("h", "order:{a}", fmt.Errorf("acquire: %w", rdb.ErrLeaseHeld))
	if lines() != 0 {
		t.Fatal("a held lease must stay silent")
	}
	boom := errors.New("boom")
	d.acquireFailed("h", "order:{a}", boom)
	d.acquireFailed("h", "order:{b}", boom)
	d.acquireFailed("h", "order:{c}", boom)
	d.acquireFailed("g", "order:{a}", boom)
	if lines() != 2 {
		t.Fatalf("%d lines, want one per handler:\n%s", lines(), logs.String())
	}
	d.mu.Lock()
	d.acquireLogs["h"].last = time.Now().Add(-acquireLogEvery)
	d.mu.Unlock()
	d.acquireFailed("h", "order:{d}", boom)
	if lines() != 3 || !strings.Contains(logs.String(), "failures_not_logged=2") {
		t.Fatalf("after acquireLogEvery: want a third line counting 2 not logged:\n%s", logs.String())
	}
}
