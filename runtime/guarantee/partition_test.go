package guarantee

import (
	"strings"
	"testing"
	"time"

	"github.com/seqby/seqby/internal/redistest"
)

// partitionExtra is how many more events per key the partition test
// publishes after the partition heals, so the engine that was cut off
// has work again.
const partitionExtra = 20

// In the strict mode a network partition that leaves one engine alone
// with the old primary, while the sentinels promote a replica on the
// other side, makes no second owner: the cut-off engine (i1) can still
// write to its primary, but no replica confirms those writes, so it
// starts no event after the one in flight and counts its leases lost;
// the other side (i2) takes the keys over on the new primary only once
// the old primary has rejoined as a replica (the strict mode's two
// replicas), where i1's unconfirmed writes are discarded. The witness
// sees every key's events enter in publish order with only the event in
// flight entered again, never two at once; after the partition heals, i1
// follows the new primary and owns keys again.
//
// In the default mode the same partition makes two owners: i1 runs its
// keys to the end on the old primary while i2 runs them again from what
// had been replicated, and this test fails.
func TestPartitionStrictMode(t *testing.T) {
	f := startFailoverScene(t, true, true)
	f.waitProgress(failoverStartAt)
	f.c.waitOwnsSome("i1", failoverKeys)
	isolated, _, err := f.s.IsolatePrimary(f.c.ctx, redistest.Partitioned)
	if err != nil {
		t.Fatal(err)
	}
	// i1 is cut off with the old primary. The partition lasts until i1
	// has let every partition go (its snapshots go to the old primary,
	// read here past the proxy) or has finished a key there, which only a
	// second owner would.
	f.c.eventually(60*time.Second, "i1 to own nothing on the isolated primary, or to finish a key there", func() bool {
		if v, err := isolated.Do("GET", statusKey("i1")); err == nil {
			if _, owned, _ := strings.Cut(v, "|"); owned == "" {
				return true
			}
		}
		for _, k := range failoverKeys {
			for _, m := range f.witnessed(k) {
				if m.Instance == "i1" && m.Phase == "exit" && m.Seq == failoverEvents {
					return true
				}
			}
		}
		return false
	})
	if err := f.s.Heal(f.c.ctx); err != nil {
		t.Fatal(err)
	}
	var more [][]Step
	for _, k := range failoverKeys {
		more = append(more, steps(k, failoverEvents+1, failoverEvents+partitionExtra))
	}
	f.c.publish(interleave(more...)...)
	last := failoverEvents + partitionExtra
	f.c.waitApplied(120*time.Second, last, failoverKeys...)
	f.c.waitOwnsSome("i1", failoverKeys)
	f.checkKeptPromise(last)
}
