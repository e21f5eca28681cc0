package guarantee

import (
	"errors"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seqby/seqby/runtime/inspect"
	"github.com/seqby/seqby/runtime/internal/rdb"
)

// halt is one halt an instance reported (haltsKey).
type halt struct {
	Instance, Key, EntryID string
	Generation             int64
}

// halts returns the halts reported for key, oldest first.
func (c *cluster) halts(key string) []halt {
	var out []halt
	for _, h := range c.rdb.LRange(c.ctx, haltsKey(), 0, -1).Val() {
		if f := strings.Split(h, "|"); len(f) == 4 && f[1] == key {
			g, _ := strconv.ParseInt(f[3], 10, 64)
			out = append(out, halt{f[0], f[1], f[2], g})
		}
	}
	return out
}

// waitHalt waits for a halt of key at a generation above after and
// returns it.
func (c *cluster) waitHalt(key string, after int64) halt {
	c.t.Helper()
	var got halt
	c.eventually(30*time.Second, "a halt of "+key, func() bool {
		for _, h := range c.halts(key) {
			if h.Generation > after {
				got = h
				return true
			}
		}
		return false
	})
	return got
}

// scriptDelLease deletes a lease and returns the Redis time it did, in µs.
var scriptDelLease = redis.NewScript(`
local t = redis.call('TIME')
redis.call('DEL', KEYS[1])
return t[1] .. string.format('%06d', tonumber(t[2]))
`)

// TestRecoveryPathsKeepTheGuarantee (issue #23): the paths that run when
// things go wrong, on three engine processes. client-A halts on a
// downstream outage and is retried slowly; its owner is stopped
// gracefully (a handover of a halted head) and its successor's lease is
// deleted while it retries; then the outage ends. client-B halts on a
// poison head retried slowly, and an operator skips it: refused while a
// retry runs, accepted between retries. Two keys on three instances leave
// one instance free to take a key the moment its lease goes. No
// attempt starts while the lease holds another owner's token, the
// in-progress marker never sees two events of a key at once, and every
// key applies its events in publish order (B without its skipped head).
func TestRecoveryPathsKeepTheGuarantee(t *testing.T) {
	c := newCluster(t, ttl)
	c.haltedRetry = 100 * time.Millisecond
	for _, id := range []string{"i1", "i2", "i3"} {
		c.start(id)
	}
	const n = 6
	A, B := "client-A", "client-B"
	if err := c.rdb.Set(c.ctx, outageKey(A), "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	a, b := steps(A, 1, n), steps(B, 1, n)
	a[1].Outage, a[1].SlowMS = true, 150
	b[1].Fail, b[1].SlowMS = true, 600 // longer than a takeover: an accepted skip would overlap
	c.publish(interleave(a, b)...)

	// A: a graceful handover of its halted head, which must not count as
	// a delivery, then its new owner's lease deleted mid-retries.
	h := c.waitHalt(A, 0)
	c.signal(h.Instance, syscall.SIGTERM)
	if err := c.waitExit(h.Instance, 30*time.Second); err != nil {
		t.Fatalf("graceful stop of %s: %v", h.Instance, err)
	}
	c.start(h.Instance) // the same OwnerID again, after a graceful stop
	c.waitHalt(A, h.Generation)
	lease := rdb.LeaseKey(rdb.PartitionStream(Category, A), group)
	if err := scriptDelLease.Run(c.ctx, c.rdb, []string{lease}).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.rdb.Del(c.ctx, outageKey(A)).Err(); err != nil {
		t.Fatal(err)
	}

	// B: the operator's skip, refused while the halted owner's retry runs.
	hb := c.waitHalt(B, 0)
	in := inspect.New(c.rdb)
	stream := rdb.PartitionStream(Category, B)
	refused := 0
	// First while a retry's body runs (the marker holds the head): with
	// the halt recorded, that skip must be refused.
	c.eventually(30*time.Second, "a retry of client-B's head running", func() bool {
		return strings.HasSuffix(c.rdb.Get(c.ctx, markerKey(B)).Val(), "|"+B+"#2") &&
			c.rdb.HExists(c.ctx, rdb.MetaKey(rdb.LeaseKey(stream, group)), rdb.MetaHalt).Val()
	})
	c.eventually(60*time.Second, "the skip of client-B's head", func() bool {
		_, err := in.Skip(c.ctx, group, stream, hb.EntryID)
		switch {
		case err == nil:
			return true
		case errors.Is(err, inspect.ErrRetrying):
			refused++
		case !errors.Is(err, inspect.ErrNotHalted):
			t.Fatalf("skip of %s: %v", hb.EntryID, err)
		}
		return false
	})
	t.Logf("the skip was refused %d times while a retry ran", refused)

	c.waitApplied(30*time.Second, n, A)
	c.eventually(30*time.Second, "client-B applied after its skipped head", func() bool {
		got, _ := collapseReruns(c.appliedSeqs(B))
		return len(got) == n-1
	})
	c.checkOrder(A, n)
	if got, _ := collapseReruns(c.appliedSeqs(B)); !slices.Equal(got, []int{1, 3, 4, 5, 6}) {
		t.Errorf("client-B applied %v, want [1 3 4 5 6]", got)
	}
	for _, k := range []string{A, B} {
		c.checkExclusive(k, nil)
		if lost := c.rdb.LRange(c.ctx, lostLeaseKey(k), 0, -1).Val(); len(lost) > 0 {
			t.Errorf("%s: attempts started while the lease held another owner: %v", k, lost)
		}
	}
	// The handover and the lease deletion never made the outage's halt
	// permanent; the skipped head's halted owner reports a resolution.
	logs := func(id string) string { b, _ := os.ReadFile(c.proc(id).log); return string(b) }
	c.eventually(30*time.Second, "the skip logged as resolved by operator", func() bool {
		for _, id := range []string{"i1", "i2", "i3"} {
			for _, l := range strings.Split(logs(id), "\n") {
				if strings.Contains(l, "halt resolved by operator") && strings.Contains(l, stream) {
					return true
				}
			}
		}
		return false
	})
	for _, id := range []string{"i1", "i2", "i3"} {
		for _, l := range strings.Split(logs(id), "\n") {
			if strings.Contains(l, "delivered too many times") {
				t.Errorf("%s halted a head as delivered too many times: %s", id, l)
			}
			if strings.Contains(l, "lease lost") && strings.Contains(l, stream) {
				t.Errorf("%s logged the operator's skip as a lost lease: %s", id, l)
			}
		}
	}
}
