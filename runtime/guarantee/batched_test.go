package guarantee

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
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
	first := killBatchedOwner(c, n, inFlight)
	if first != inFlight-batch+1 {
		t.Errorf("after the kill the next owner began at %d, want %d: the %d events the dead owner ran and had not acked", first, inFlight-batch+1, batch)
	}
	checkBatchedRerun(c, batch, n, inFlight)
}

// TestBatchedCrashDeepBacklog: the same with a backlog deeper than one
// read, so the owner reads its next entries ahead of need (the batched
// mode's prefetch) and one may be in flight when it dies: still at most
// AckBatch events run again, in order, and nothing is lost.
func TestBatchedCrashDeepBacklog(t *testing.T) {
	const batch, n, inFlight = 4, 200, 100
	c := newCluster(t, ttl)
	c.ackBatch = batch
	killBatchedOwner(c, n, inFlight)
	checkBatchedRerun(c, batch, n, inFlight)
}

// killBatchedOwner publishes client-A's events 1..n (inFlight slow),
// starts two instances, SIGKILLs the one inside event inFlight and waits
// until every event is applied. It returns the first event the next owner
// ran.
func killBatchedOwner(c *cluster, n, inFlight int) int {
	c.t.Helper()
	a := steps("client-A", 1, n)
	a[inFlight-1].SlowMS = 1500 // in flight when its owner dies
	c.publish(a...)
	c.start("i1")
	c.start("i2")
	var victim mark
	c.eventually(30*time.Second, fmt.Sprintf("client-A's event %d in the handler", inFlight), func() bool {
		var ok bool
		victim, ok = entered(c.marks("client-A"), "", inFlight)
		return ok
	})
	c.kill(victim.Instance)
	c.waitApplied(30*time.Second, n, "client-A")
	for _, m := range c.marks("client-A") {
		if m.Phase == "enter" && m.Token != victim.Token {
			return m.Seq
		}
	}
	return 0
}

// checkBatchedRerun fails the test unless client-A's first owner ran
// 1..inFlight and died in inFlight, the next owner ran one run of
// consecutive events from at most batch back from inFlight through n, the
// applied log is the first owner's then the next owner's, and no two
// events ran at once but for the dead owner's unfinished one.
func checkBatchedRerun(c *cluster, batch, n, inFlight int) {
	c.t.Helper()
	t := c.t
	ms := c.marks("client-A")
	victim, _ := entered(ms, "", inFlight)
	var before, after []int
	for _, m := range ms {
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
		t.Fatalf("after the kill the next owner ran %v: want the events from at most %d back from %d, in order, through %d", after, batch, inFlight, n)
	}
	if want := append(seqs(1, inFlight-1), seqs(after[0], n)...); !slices.Equal(c.appliedSeqs("client-A"), want) {
		t.Errorf("client-A applied %v, want %v", c.appliedSeqs("client-A"), want)
	}
	if s := c.state("client-A"); s != n {
		t.Errorf("client-A's optimistic state is %d, want %d", s, n)
	}
	// The dead owner never finished its last event, so its in-progress
	// marker stays held by it: the next owner's first re-run finds it so.
	// Any other overlap is a violation; the runs' times are checked apart.
	stale := fmt.Sprintf("%s|client-A#%d was in progress when ", victim.Instance, inFlight)
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
