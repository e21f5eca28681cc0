package guarantee

import (
	"slices"
	"testing"
	"time"

	"github.com/seqby/seqby/runtime/inspect"
	"github.com/seqby/seqby/runtime/internal/rdb"
)

// redisMicros is Redis's clock now, in microseconds (the marks' clock).
func (c *cluster) redisMicros() int64 {
	c.t.Helper()
	now, err := c.rdb.Time(c.ctx).Result()
	if err != nil {
		c.t.Fatal(err)
	}
	return now.UnixMicro()
}

// enteredAfter returns the seqs of key's handler entries at or after
// Redis time at (µs).
func (c *cluster) enteredAfter(key string, at int64) []int {
	var out []int
	for _, m := range c.marks(key) {
		if m.Phase == "enter" && m.At >= at {
			out = append(out, m.Seq)
		}
	}
	return out
}

// waitPausedAt waits until instance id reports the partition of key
// paused under its current lease token.
func (c *cluster) waitPausedAt(id, key string) {
	c.t.Helper()
	c.eventually(30*time.Second, id+" to find "+key+" paused", func() bool {
		tok := c.rdb.Get(c.ctx, rdb.LeaseKey(rdb.PartitionStream(Category, key), group)).Val()
		_, paused := c.pausedStatus(id)
		return tok != "" && slices.Contains(paused, tok)
	})
}

// Pause and resume across engine processes: once Inspector.Pause
// returns, no event of the key enters the handler on any instance (by
// Redis's clock, on the Recorder's marks) while the other key goes on;
// the pause outlives a SIGKILL of the key's owner (the next owner claims
// it and finds it paused); Resume lets the key go on in publish order;
// a paused handler stops every key from the next discovery cycle, and
// its resume lets them go on.
func TestPauseAcrossInstances(t *testing.T) {
	c := newCluster(t, 2*time.Second)
	c.start("i1")
	c.start("i2")
	const n = 40
	P, Q := "pause-P", "pause-Q"
	c.publish(interleave(slow(10, steps(P, 1, n)), slow(10, steps(Q, 1, n)))...)
	c.eventually(30*time.Second, P+" applied through 5", func() bool { return c.state(P) >= 5 })

	in := inspect.New(c.rdb)
	if _, err := in.Pause(c.ctx, group, rdb.PartitionStream(Category, P), "test"); err != nil {
		t.Fatal(err)
	}
	paused := c.redisMicros()
	owner, _ := c.owner(P)
	c.waitPausedAt(owner, P)
	c.waitApplied(60*time.Second, n, Q)
	if got := c.enteredAfter(P, paused); len(got) > 0 {
		t.Fatalf("%s: events %v entered the handler after the pause was stored", P, got)
	}
	stoppedAt := c.state(P)

	// The owner dies; the other instance claims the key and finds it
	// paused.
	c.kill(owner)
	other := "i1"
	if owner == "i1" {
		other = "i2"
	}
	c.eventually(30*time.Second, other+" to own "+P, func() bool { o, _ := c.owner(P); return o == other })
	c.waitPausedAt(other, P)
	if got := c.enteredAfter(P, paused); len(got) > 0 {
		t.Fatalf("%s: events %v entered the handler after the pause, across the takeover", P, got)
	}
	if s := c.state(P); s != stoppedAt {
		t.Fatalf("%s: applied through %d while paused (was %d)", P, s, stoppedAt)
	}
	c.start(owner)

	if _, err := in.Resume(c.ctx, group, rdb.PartitionStream(Category, P)); err != nil {
		t.Fatal(err)
	}
	c.waitApplied(60*time.Second, n, P)

	// The whole handler: once every instance's discovery found the pause,
	// no key starts anything, then every key goes on.
	if _, err := in.PauseHandler(c.ctx, group, "test"); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"i1", "i2"} {
		c.eventually(30*time.Second, id+" to find the handler paused", func() bool {
			_, paused := c.pausedStatus(id)
			return slices.Contains(paused, "handler:"+group)
		})
	}
	handlerPaused := c.redisMicros()
	const more = 10
	c.publish(interleave(steps(P, n+1, n+more), steps(Q, n+1, n+more))...)
	for _, k := range []string{P, Q} {
		o, _ := c.owner(k)
		c.waitPausedAt(o, k)
		if got := c.enteredAfter(k, handlerPaused); len(got) > 0 {
			t.Fatalf("%s: events %v entered the handler while it was paused", k, got)
		}
	}
	if _, err := in.ResumeHandler(c.ctx, group); err != nil {
		t.Fatal(err)
	}
	c.waitApplied(60*time.Second, n+more, P, Q)
	for _, k := range []string{P, Q} {
		c.checkOrder(k, n+more)
		// The owner killed above was idle on P (paused): nothing of it
		// was in flight.
		c.checkExclusive(k, nil)
	}
}
