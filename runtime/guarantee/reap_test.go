package guarantee

import (
	"testing"
	"time"

	"github.com/seqby/seqby/runtime/internal/rdb"
)

// TestReapBetweenBursts: with ReapAfter short, every partition goes cold
// between bursts of events and is reaped, and the owner of client-A is
// SIGKILLed inside an event of the third burst. Each key's events still
// apply in publish order, never two at once: a reaped partition comes back
// with its next publish, under a lease whose generation is above every
// earlier one of the key, although its generation counter was reaped.
func TestReapBetweenBursts(t *testing.T) {
	c := newCluster(t, ttl)
	c.reapAfter = 300 * time.Millisecond
	c.start("i1")
	c.start("i2")
	keys := []string{"client-A", "client-B", "client-C"}
	const bursts, per = 4, 5
	var victim mark
	for b := range bursts {
		from, to := b*per+1, (b+1)*per
		var lists [][]Step
		for _, k := range keys {
			lists = append(lists, slow(10, steps(k, from, to)))
		}
		if b == 2 {
			lists[0][2].SlowMS = 1500 // in flight when its owner dies
		}
		c.publish(interleave(lists...)...)
		if b == 2 {
			c.eventually(30*time.Second, "client-A's event in the handler", func() bool {
				var ok bool
				victim, ok = entered(c.marks("client-A"), "", from+2)
				return ok
			})
			c.kill(victim.Instance)
			c.start("i3")
		}
		c.waitApplied(30*time.Second, to, keys...)
		c.eventually(30*time.Second, "every partition reaped", func() bool {
			ks, err := rdb.Partitions(c.ctx, c.rdb, Category)
			return err == nil && len(ks) == 0
		})
	}
	unfinished := func(w window) bool { return w.Instance == victim.Instance && w.To == openEnd }
	for _, k := range keys {
		c.checkOrder(k, bursts*per)
		c.checkExclusive(k, unfinished)
		var last int64
		for _, m := range c.marks(k) {
			_, gen, err := rdb.ParseToken(m.Token)
			if err != nil {
				t.Fatal(err)
			}
			if gen < last {
				t.Errorf("%s: event %d entered under generation %d, after %d", k, m.Seq, gen, last)
			}
			last = gen
		}
	}
}
