package unkeyed

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seqby/seqby/internal/logsink"
	"github.com/seqby/seqby/runtime/internal/contract"
)

// The halted entries an instance remembers are bounded: the oldest is
// forgotten first, and marking one twice does not count it twice.
func TestMarkHaltedBound(t *testing.T) {
	s := &state{halted: map[string]struct{}{}}
	s.markHalted("note", "0-1")
	s.markHalted("note", "0-1")
	for i := 2; i <= maxHaltedIDs+1; i++ {
		s.markHalted("note", fmt.Sprintf("0-%d", i))
	}
	if s.isHalted("note", "0-1") {
		t.Error("the oldest halted entry is still remembered past the bound")
	}
	if !s.isHalted("note", "0-2") || !s.isHalted("note", fmt.Sprintf("0-%d", maxHaltedIDs+1)) {
		t.Error("a halted entry within the bound is forgotten")
	}
	if s.isHalted("other", "0-2") {
		t.Error("an entry of another stream counts as halted")
	}
}

// Status lists an entry's halt once, and the latest maxHalts only.
func TestNoteHaltOnceAndBound(t *testing.T) {
	r := New(Config{})
	h := contract.Halt{Handler: "h", Stream: "note", EntryID: "0-1"}
	if !r.noteHalt(h) || r.noteHalt(h) {
		t.Fatal("the same entry's halt is noted twice")
	}
	if !r.noteHalt(contract.Halt{Handler: "g", Stream: "note", EntryID: "0-1"}) {
		t.Fatal("another handler's halt on the entry is not noted")
	}
	for i := 2; i <= maxHalts+1; i++ {
		r.noteHalt(contract.Halt{Handler: "h", Stream: "note", EntryID: fmt.Sprintf("0-%d", i)})
	}
	hs := r.Halts()
	if len(hs) != maxHalts || hs[0].Handler != "h" || hs[0].EntryID != "0-2" {
		t.Fatalf("%d halts, first %+v: want the latest %d", len(hs), hs[0], maxHalts)
	}
}

// A plain worker runs new entries and acks them; a poison entry is
// alerted once and stays pending on this consumer, and the worker moves
// on; an entry a dead consumer left pending is claimed, and the dead
// consumer deleted.
func TestRunPlain(t *testing.T) {
	c := newRedis(t)
	ctx := ctxT(t)
	var log logsink.Buffer
	var alerts halts
	var mu sync.Mutex
	seen := map[int]int{}
	r := newRunner(t, c, "o1", func(n *note) error {
		mu.Lock()
		seen[n.N]++
		mu.Unlock()
		if n.N == 2 {
			return errors.New("poison")
		}
		return nil
	}, &log, &alerts)
	// A dead consumer's entry, pending longer than LeaseTTL.
	if err := c.XGroupCreateMkStream(ctx, "note", "h", "0").Err(); err != nil {
		t.Fatal(err)
	}
	publish(t, c, 0)
	if err := c.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "h", Consumer: "dead", Streams: []string{"note", ">"}, Count: 1}).Err(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(600 * time.Millisecond)
	publish(t, c, 1)
	publish(t, c, 2)
	publish(t, c, 3)

	stop := make(chan struct{})
	var done atomic.Bool
	go func() { r.RunPlain(context.Background(), stop, "h", "note"); done.Store(true) }()
	defer func() {
		close(stop)
		eventually(t, 5*time.Second, "the worker's end", done.Load)
	}()
	runs := func(n int) int { mu.Lock(); defer mu.Unlock(); return seen[n] }
	eventually(t, 10*time.Second, "every entry run", func() bool {
		return runs(0) == 1 && runs(1) == 1 && runs(3) == 1 && alerts.len() == 1
	})
	eventually(t, 10*time.Second, "the dead consumer deleted", func() bool {
		cons, err := c.XInfoConsumers(ctx, "note", "h").Result()
		return err == nil && len(cons) == 1 && cons[0].Name == "o1"
	})
	p, err := c.XPending(ctx, "note", "h").Result()
	if err != nil || p.Count != 1 || p.Consumers["o1"] != 1 {
		t.Fatalf("pending %+v, %v: want the poison entry only, on o1", p, err)
	}
	time.Sleep(700 * time.Millisecond) // past LeaseTTL: a retry of its own entries skips the halted one
	if n := runs(2); n != 2 || alerts.len() != 1 {
		t.Fatalf("poison entry ran %d times (2 attempts), alerted %d times: want once", n, alerts.len())
	}
	if hs := r.Halts(); len(hs) != 1 || hs[0].Handler != "h" {
		t.Fatalf("Halts %+v: want the poison entry's", hs)
	}
}
