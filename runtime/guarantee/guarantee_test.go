package guarantee

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// The tests below map one to one onto the assertions of ADR-0028 ("Mapping
// each guarantee to the test #831 must pass"). Each runs its own redis-server
// and engine processes; the Recorder's records in Redis are the evidence.

// ttl is the lease TTL of the instances: short, so failovers take about a
// second.
const ttl = time.Second

// slow sets SlowMS on every step.
func slow(ms int, s []Step) []Step {
	for i := range s {
		s[i].SlowMS = ms
	}
	return s
}

// TestStrictPerKeyOrder: for each key, the handler applies the key's events
// in published order. Interleaved events for three keys, two instances; the
// second instance joins mid-stream so partitions are handed over while
// events flow.
func TestStrictPerKeyOrder(t *testing.T) {
	c := newCluster(t, ttl)
	keys := []string{"client-A", "client-B", "client-C"}
	const n = 24
	var first, second [][]Step
	for _, k := range keys {
		first = append(first, slow(5, steps(k, 1, n/2)))
		second = append(second, slow(5, steps(k, n/2+1, n)))
	}
	c.start("i1")
	c.publish(interleave(first...)...)
	c.waitApplied(30*time.Second, 2, keys...)
	c.start("i2")
	c.publish(interleave(second...)...)
	c.waitApplied(60*time.Second, n, keys...)
	for _, k := range keys {
		if r := c.checkOrder(k, n); r > 0 {
			t.Logf("%s: %d re-runs across a handover (at-least-once)", k, r)
		}
	}
}

// TestNoConcurrentEntrySameKey: two different events of one key are never in
// the handler at once, across instances. The cross-instance marker in Redis
// must never be found held by another event on entry, and the recorded runs
// (Redis time) of different events of a key must not intersect. The second
// instance joins mid-stream so that keys move between instances.
func TestNoConcurrentEntrySameKey(t *testing.T) {
	c := newCluster(t, ttl)
	keys := []string{"client-A", "client-B", "client-C", "client-D"}
	const n = 20
	var first, second [][]Step
	for _, k := range keys {
		first = append(first, slow(10, steps(k, 1, n/2)))
		second = append(second, slow(10, steps(k, n/2+1, n)))
	}
	c.start("i1")
	c.publish(interleave(first...)...)
	c.waitApplied(30*time.Second, 2, keys...)
	c.start("i2")
	c.publish(interleave(second...)...)
	c.waitApplied(60*time.Second, n, keys...)
	shared := 0
	for _, k := range keys {
		c.checkExclusive(k)
		insts := map[string]bool{}
		for _, m := range c.marks(k) {
			insts[m.Instance] = true
		}
		if len(insts) > 1 {
			shared++
		}
	}
	// The check only means something if a key's events ran on both
	// instances: i1 owned every key, then handed half to i2.
	if shared == 0 {
		t.Fatal("no key was handled by both instances; the test did not exercise a cross-instance handover")
	}
}

// TestCrossKeyParallelism: client-A and client-B are in their handlers at
// the same time, so the engine serializes per key without serializing
// everything. A logical check on recorded windows, not a speed check.
func TestCrossKeyParallelism(t *testing.T) {
	c := newCluster(t, ttl)
	c.start("i1")
	c.start("i2")
	const n = 3
	c.publish(interleave(slow(300, steps("client-A", 1, n)), slow(300, steps("client-B", 1, n)))...)
	c.waitApplied(30*time.Second, n, "client-A", "client-B")
	wa, wb := windows(c.marks("client-A")), windows(c.marks("client-B"))
	found := false
	for _, a := range wa {
		for _, b := range wb {
			found = found || a.overlaps(b)
		}
	}
	if !found {
		t.Fatalf("client-A's and client-B's handler runs never overlapped: A %s, B %s", fmtWindows(wa), fmtWindows(wb))
	}
	c.checkExclusive("client-A")
	c.checkExclusive("client-B")
}

func fmtWindows(ws []window) string {
	s := make([]string, 0, len(ws))
	for _, w := range ws {
		s = append(s, fmt.Sprintf("#%d@%s[%d,%d]", w.Seq, w.Instance, w.From, w.To))
	}
	slices.Sort(s)
	return fmt.Sprint(s)
}
