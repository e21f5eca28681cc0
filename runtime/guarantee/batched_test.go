package guarantee

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/seqby/seqby/runtime/internal/rdb"
)

// TestBatchedCrashRerunsAtMostAckBatch: with Registration.AckBatch N a
// partition runs the entries it read ahead without waiting for each ack,
// up to N unanswered. SIGKILL its owner inside an entry: the next owner
// runs again at most N entries (the one in flight and the ones before it
// not acked yet), in order, then goes on; nothing is lost, skipped or
// reordered, and no two entries of the key ever ran at once.
//
// The events are published before any instance runs, so the first read
// takes them all, and VerifyBound is long, so no ack goes early for
// staleness: the owner runs 1-4 (4 unanswered), acks them, runs 5-7
// unacked and dies in 8. Exactly N entries, 5 to 8, run again.
func TestBatchedCrashRerunsAtMostAckBatch(t *testing.T) {
	const batch, n, inFlight = 4, 12, 8
	c := newCluster(t, ttl)
	c.ackBatch, c.verifyBound = batch, time.Minute
	a := steps("client-A", 1, n)
	a[inFlight-1].SlowMS = 1500 // in flight when its owner dies
	c.publish(a...)
	c.start("i1")
	c.start("i2")
	var victim mark
	c.eventually(30*time.Second, "client-A's event 8 in the handler", func() bool {
		var ok bool
		victim, ok = entered(c.marks("client-A"), "", inFlight)
		return ok
	})
	_, victimGen, _ := rdb.ParseToken(victim.Token)
	c.kill(victim.Instance)
	survivor := other(victim.Instance)
	c.eventually(30*time.Second, survivor+" claims client-A", func() bool {
		o, g := c.owner("client-A")
		return o == survivor && g > victimGen
	})
	c.waitApplied(30*time.Second, n, "client-A")
	var before, after []int
	for _, m := range c.marks("client-A") {
		switch {
		case m.Phase != "enter":
		case m.Token == victim.Token:
			before = append(before, m.Seq)
		default:
			after = append(after, m.Seq)
		}
	}
	if want := seqs(1, inFlight); !slices.Equal(before, want) {
		t.Errorf("the first owner ran %v, want %v", before, want)
	}
	// In order: the next owner's runs are one run of consecutive events
	// to the last, starting at most batch events back from the one in
	// flight.
	if want := seqs(inFlight-batch+1, n); !slices.Equal(after, want) {
		t.Errorf("after the kill %s ran %v, want %v: the %d events the dead owner ran and had not acked, in order, then the rest", survivor, after, want, batch)
	}
	applied := c.appliedSeqs("client-A")
	if want := append(seqs(1, inFlight-1), seqs(inFlight-batch+1, n)...); !slices.Equal(applied, want) {
		t.Errorf("client-A applied %v, want %v", applied, want)
	}
	if s := c.state("client-A"); s != n {
		t.Errorf("client-A's optimistic state is %d, want %d", s, n)
	}
	// The dead owner never finished event 8, so its in-progress marker
	// stays held by it: the next owner's re-run of 5 finds it so. Any
	// other overlap is a violation; the runs' times are checked apart.
	stale := victim.Instance + "|client-A#8 was in progress when "
	for _, ov := range c.overlaps("client-A") {
		if !strings.HasPrefix(ov, stale) {
			t.Errorf("client-A: the in-progress marker was held by two events at once: %s", ov)
		}
	}
	unfinished := func(w window) bool { return w.Instance == victim.Instance && w.To == openEnd }
	c.checkWindows("client-A", unfinished)
}

// seqs is from..to.
func seqs(from, to int) []int {
	var out []int
	for i := from; i <= to; i++ {
		out = append(out, i)
	}
	return out
}

// TestBatchedCrashDeepBacklog: the same with a backlog deeper than one
// read, so the owner reads its next entries ahead of need (the batched
// mode's prefetch) and one may be in flight when it dies: still at most
// AckBatch events run again, in order, and nothing is lost.
func TestBatchedCrashDeepBacklog(t *testing.T) {
	const batch, n, inFlight = 4, 200, 100
	c := newCluster(t, ttl)
	c.ackBatch = batch
	a := steps("client-A", 1, n)
	a[inFlight-1].SlowMS = 1500 // in flight when its owner dies
	c.publish(a...)
	c.start("i1")
	c.start("i2")
	var victim mark
	c.eventually(30*time.Second, "client-A's event 100 in the handler", func() bool {
		var ok bool
		victim, ok = entered(c.marks("client-A"), "", inFlight)
		return ok
	})
	c.kill(victim.Instance)
	c.waitApplied(30*time.Second, n, "client-A")
	var before, after []int
	for _, m := range c.marks("client-A") {
		switch {
		case m.Phase != "enter":
		case m.Token == victim.Token:
			before = append(before, m.Seq)
		default:
			after = append(after, m.Seq)
		}
	}
	if want := seqs(1, inFlight); !slices.Equal(before, want) {
		t.Errorf("the first owner ran %v, want %v", before, want)
	}
	if len(after) == 0 || after[0] > inFlight || inFlight-after[0]+1 > batch || !slices.Equal(after, seqs(after[0], n)) {
		t.Errorf("after the kill the next owner ran %v: want the events from at most %d back from %d, in order, through %d", after, batch, inFlight, n)
	}
	if len(after) > 0 {
		applied := c.appliedSeqs("client-A")
		if want := append(seqs(1, inFlight-1), seqs(after[0], n)...); !slices.Equal(applied, want) {
			t.Errorf("client-A applied %v, want %v", applied, want)
		}
	}
	if s := c.state("client-A"); s != n {
		t.Errorf("client-A's optimistic state is %d, want %d", s, n)
	}
	stale := victim.Instance + "|client-A#100 was in progress when "
	for _, ov := range c.overlaps("client-A") {
		if !strings.HasPrefix(ov, stale) {
			t.Errorf("client-A: the in-progress marker was held by two events at once: %s", ov)
		}
	}
	unfinished := func(w window) bool { return w.Instance == victim.Instance && w.To == openEnd }
	c.checkWindows("client-A", unfinished)
}
