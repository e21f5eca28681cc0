package guarantee

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seqby/seqby/internal/redistest"
	"github.com/seqby/seqby/runtime"
	"github.com/seqby/seqby/runtime/internal/rdb"
)

// The failover tests run on the Sentinel topology (a primary, two
// replicas, three sentinels) and on the cluster one, where they start a
// Redis Cluster of three primaries with one replica each
// (redistest.NewClusterReplicas): two engine processes, and a witness, a
// redis-server of its own to which the Recorder also writes every entry,
// exit and commit, so what ran is on record even where the failover took
// Redis's own records back. Every event is published before the failover
// with PublisherOptions.ReplicaAcks set to every replica, so no publish
// is lost and what the tests see is the engine's writes only.

// failoverTTL is the instances' lease TTL here: longer than a manual
// failover's switch (about a second), as a production TTL (15s) is.
const failoverTTL = 5 * time.Second

// failoverKeys and failoverEvents: enough work, at failoverSlowMS an
// event, that a failover started once every key is failoverStartAt events
// in lands in the middle of it. The sentinels switch about 1.2 s after
// SENTINEL FAILOVER here (an instance whose sentinel hears of it late, up
// to 7.5 s): at 5 ms an event the engines sometimes ran out of work first,
// three failovers in a row (1 run in 33), so nothing was there to rewind.
var failoverKeys = []string{"fo-1", "fo-2", "fo-3", "fo-4"}

const (
	failoverEvents  = 300
	failoverSlowMS  = 10
	failoverStartAt = 40
)

// failoverScene is one failover test's setup: s on Sentinel, cl on a
// cluster.
type failoverScene struct {
	s       *redistest.Sentinel
	cl      *redistest.Cluster
	c       *cluster
	witness redis.UniversalClient
}

// startFailoverScene starts the topology, two instances (strict:
// Options.ReplicaAcks, every replica) and publishes the events. With
// partitionable (Sentinel only), every server is behind a proxy
// (redistest.StartSentinelProxied) and i1 dials from
// redistest.Partitioned, so IsolatePrimary can leave it alone with the
// old primary.
func startFailoverScene(t *testing.T, strict, partitionable bool) *failoverScene {
	t.Helper()
	switch {
	case partitionable && !onSentinel():
		t.Skip("runs on the Sentinel topology (SEQBY_TOPOLOGY=sentinel, part of make test)")
	case !onSentinel() && !onCluster():
		t.Skip("runs on the Sentinel and cluster topologies (SEQBY_TOPOLOGY=sentinel or cluster, part of make test)")
	}
	f := &failoverScene{}
	var addr string
	replicas := 2
	switch {
	case onCluster():
		f.cl = redistest.NewClusterReplicas(t, 3, 1)
		addr, replicas = strings.Join(f.cl.Addrs(), ","), 1
	case partitionable:
		f.s = redistest.NewSentinelProxied(t, 2, 3)
		addr = sentinelURL(f.s)
	default:
		f.s = redistest.NewSentinel(t, 2, 3)
		addr = sentinelURL(f.s)
	}
	w := redistest.New(t)
	c := newClusterAt(t, failoverTTL, addr)
	c.witness = w.Addr
	if strict {
		c.replicaAcks = replicas
	}
	if partitionable {
		c.sources = map[string]string{"i1": redistest.Partitioned}
	}
	c.pub = runtime.NewPublisher(c.rdb, runtime.PublisherOptions{ReplicaAcks: replicas, ReplicaTimeout: 5 * time.Second})
	witness := redis.NewClient(&redis.Options{Addr: w.Addr, ContextTimeoutEnabled: true})
	t.Cleanup(func() { witness.Close() })
	c.start("i1")
	c.start("i2")
	var lists [][]Step
	for _, k := range failoverKeys {
		lists = append(lists, slow(failoverSlowMS, steps(k, 1, failoverEvents)))
	}
	c.publish(interleave(lists...)...)
	f.c, f.witness = c, witness
	return f
}

// failover replaces the primary while it runs: SENTINEL FAILOVER, or on
// a cluster a failover of every shard that holds a failover key (CLUSTER
// FAILOVER, coordinated, which loses nothing; with force, CLUSTER
// FAILOVER FORCE, where the old primary takes writes until it learns of
// the new one, as Sentinel's does until each client has switched).
func (f *failoverScene) failover(force bool) {
	f.c.t.Helper()
	if f.s != nil {
		if _, err := f.s.Failover(f.c.ctx); err != nil {
			f.c.t.Fatal(err)
		}
		return
	}
	done := map[*redistest.Server]bool{}
	for _, k := range failoverKeys {
		p, err := f.cl.PrimaryOf("{" + k + "}")
		if err != nil {
			f.c.t.Fatal(err)
		}
		if done[p] {
			continue
		}
		if force {
			p, err = f.cl.FailoverForce(f.c.ctx, "{"+k+"}")
		} else {
			p, err = f.cl.Failover(f.c.ctx, "{"+k+"}")
		}
		if err != nil {
			f.c.t.Fatal(err)
		}
		done[p] = true
	}
}

// killPrimary kills (SIGKILL) the primary, on a cluster the one of the
// first failover key's shard, waits for a replica to be promoted, and
// restarts the killed server as a replica.
func (f *failoverScene) killPrimary() {
	f.c.t.Helper()
	if f.s != nil {
		killed, _, err := f.s.KillPrimary(f.c.ctx)
		if err != nil {
			f.c.t.Fatal(err)
		}
		if err := killed.Restart(f.c.ctx); err != nil {
			f.c.t.Fatal(err)
		}
		return
	}
	killed, _, err := f.cl.KillPrimary(f.c.ctx, "{"+failoverKeys[0]+"}")
	if err != nil {
		f.c.t.Fatal(err)
	}
	if err := f.cl.Rejoin(f.c.ctx, killed); err != nil {
		f.c.t.Fatal(err)
	}
}

// waitProgress waits until every key's state reached n.
func (f *failoverScene) waitProgress(n int) {
	f.c.t.Helper()
	for _, k := range failoverKeys {
		f.c.eventually(60*time.Second, fmt.Sprintf("%s applied through %d", k, n), func() bool { return f.c.state(k) >= n })
	}
}

// witnessed returns key's witness records: entries, exits and commits.
func (f *failoverScene) witnessed(key string) []mark {
	return f.c.parseMarks(f.witness.LRange(f.c.ctx, witnessKey(key), 0, -1).Val())
}

// enterSeqs are the seqs of key's handler entries, in the witness's order.
func enterSeqs(ms []mark) []int {
	var out []int
	for _, m := range ms {
		if m.Phase == "enter" {
			out = append(out, m.Seq)
		}
	}
	return out
}

// runs splits seqs, with immediate re-runs collapsed, into runs of
// consecutive seqs: a new run starts wherever a seq is not the one after
// the seq before it.
func runs(seqs []int) [][]int {
	collapsed, _ := collapseReruns(seqs)
	var out [][]int
	for i, s := range collapsed {
		if i == 0 || s != collapsed[i-1]+1 {
			out = append(out, nil)
		}
		out[len(out)-1] = append(out[len(out)-1], s)
	}
	return out
}

// checkWitnessExclusive fails the test if two runs of different events of
// key were in the handler at once by the witness's clock (nothing is
// killed here, so nothing is exempt).
func (f *failoverScene) checkWitnessExclusive(key string) {
	f.c.t.Helper()
	ws := windows(f.witnessed(key))
	for i, a := range ws {
		for _, b := range ws[i+1:] {
			if a.Seq != b.Seq && a.overlaps(b) {
				f.c.t.Errorf("%s: event %d (%s) and event %d (%s) were in the handler at once", key, a.Seq, a.Token, b.Seq, b.Token)
			}
		}
	}
}

// checkAlive fails the test if an instance exited.
func (f *failoverScene) checkAlive(ids ...string) {
	f.c.t.Helper()
	for _, id := range ids {
		select {
		case <-f.c.proc(id).done:
			f.c.t.Errorf("instance %s exited: %v\n%s", id, f.c.proc(id).err, tail(f.c.proc(id).log, 40))
		default:
		}
	}
}

// In the strict mode a primary failover mid-run keeps the default
// promise: the witness saw every key's events enter in publish order with
// only the event in flight entered again, never two events of a key in
// the handler at once, and the surviving primary holds every event
// applied once in order. Run rides through failovers in a row: a manual
// one (SENTINEL FAILOVER, the old primary taking writes until each
// client has switched; on a cluster CLUSTER FAILOVER of every shard with
// a key, then CLUSTER FAILOVER FORCE, the old primaries taking writes
// until they learn of the new ones) and a SIGKILL of the new primary (on
// a cluster, one shard's), restarted as a replica so that the strict
// mode's replicas are back. In the default mode the same run on a
// cluster failed 1 time in 3 (fo-1 entered 1..288,274..278,289..300).
func TestFailoverStrictMode(t *testing.T) {
	f := startFailoverScene(t, true, false)
	f.waitProgress(failoverStartAt)
	if f.cl != nil {
		// A cluster's coordinated failover first (CLUSTER FAILOVER).
		f.failover(false)
		f.waitProgress(failoverStartAt + 20)
	}
	f.failover(true)
	f.waitProgress(failoverStartAt + 40)
	f.killPrimary()
	f.c.waitApplied(90*time.Second, failoverEvents, failoverKeys...)
	f.checkKeptPromise(failoverEvents)
}

// checkKeptPromise fails the test unless every key applied 1..n in order
// on the surviving primary, the witness saw its events enter in publish
// order with only the event in flight entered again and never two at
// once, and both instances are alive: the default promise.
func (f *failoverScene) checkKeptPromise(n int) {
	f.c.t.Helper()
	for _, k := range failoverKeys {
		f.c.checkOrder(k, n)
		if rs := runs(enterSeqs(f.witnessed(k))); len(rs) != 1 {
			f.c.t.Errorf("%s: the witness saw the events enter as %s, want 1..%d with only the event in flight entered again", k, fmtRuns(rs), n)
		}
		f.checkWitnessExclusive(k)
	}
	f.checkAlive("i1", "i2")
	f.checkQuietWait("i1", "i2")
}

// checkQuietWait fails the test if an instance logged a partition
// without an owner as an error: while the strict mode waits for a new
// primary's replicas (a killed one restarting as a replica), its
// partitions may have no owner for a while, which the engine says once
// per handler as a warning (an error per key was seen in a soak whose
// killed primary rejoined 11-16 s later; this test's rejoins at once,
// so it guards the level rather than reproduce the wait).
func (f *failoverScene) checkQuietWait(ids ...string) {
	f.c.t.Helper()
	for _, id := range ids {
		b, err := os.ReadFile(f.c.proc(id).log)
		if err != nil {
			f.c.t.Fatal(err)
		}
		if n := strings.Count(string(b), "partition has work and no owner"); n > 0 {
			f.c.t.Errorf("instance %s logged %d errors \"partition has work and no owner\" while the strict mode waited for replicas:\n%s", id, n, tail(f.c.proc(id).log, 40))
		}
	}
}

// In the default mode a failover loses what the old primary answered and
// had not passed on: for a manual failover (SENTINEL FAILOVER) everything
// it took between the promotion of a replica and the moment each of the
// engine's connections switched, acks, commits and lease renewals alike;
// on a cluster (CLUSTER FAILOVER FORCE of every shard with a key) what
// it took until it learned of the new primary.
// The test asserts the bounds docs/runtime.md ("Failover") states:
//
//   - rewind: entries acked in that window run again, in publish order,
//     and only entries first run after the failover was asked for (the
//     first of each rewind may have been in flight); every event runs;
//   - order: at most ReadAhead entries (16 here) read ahead from the old
//     primary commit on the new one before the rewound entries run again;
//   - loss: at most one event per key, the one whose commit the old
//     primary answered and whose ack the new one did, ends acked without
//     its commit.
//
// On Sentinel it also asserts that the rewind is reached: some key ran
// acked entries again (a cluster's forced failover seldom loses a write). Two owners at once are not excluded here: renewals that keep
// landing on the old primary let leases lapse on the new one (seen for
// about 5 s), and the fence refuses only the stale owner's commits.
// Publishes wait for every replica, so none is lost.
func TestFailoverDefaultModeBounds(t *testing.T) {
	// A cluster's forced failover loses the few milliseconds of writes
	// before the old primary learns of the new one by gossip (often
	// none: seen no rewind in 6 in a row), Sentinel's about a second.
	const maxFailovers = 3
	f := startFailoverScene(t, false, false)
	f.waitProgress(failoverStartAt)
	// A rewind needs events applied in the switch: if the engines were
	// done before it (a slow promotion), publish more and fail over again.
	last, asked, failovers := failoverEvents, time.Now(), 0
	for ; failovers < maxFailovers; failovers++ {
		if failovers > 0 {
			var lists [][]Step
			for _, k := range failoverKeys {
				lists = append(lists, slow(failoverSlowMS, steps(k, last+1, last+failoverEvents)))
			}
			// The old primary may still be resyncing as a replica: a
			// publish its wait finds short goes again with its id.
			for _, st := range interleave(lists...) {
				id := runtime.WithMessageID(fmt.Sprintf("%s#%d", st.ClientID, st.Seq))
				f.c.eventually(30*time.Second, "a durable publish", func() bool { return f.c.pub.Publish(f.c.ctx, st, id) == nil })
			}
			f.waitApplied(last + failoverStartAt)
			last += failoverEvents
		}
		f.failover(true)
		f.waitSettled(last)
		if f.rewound() {
			break
		}
	}
	const readAhead = 16 // the engine's default ReadAhead
	for _, k := range failoverKeys {
		ms := f.witnessed(k)
		rs := runs(enterSeqs(ms))
		var applied []int
		f.onPrimary(func(p redis.UniversalClient) bool { applied = appliedOn(f.c.ctx, p, k); return true })
		t.Logf("%s: entered %s; applied on the new primary: %s; by owner (witness): %s", k, fmtRuns(rs), fmtSeqs(applied), byOwner(ms))
		if never := missing(enterSeqs(ms), last); rs[0][0] != 1 || len(never) > 0 {
			t.Errorf("%s: entered %s: events %v never ran", k, fmtRuns(rs), never)
		}
		for i := 1; i < len(rs); i++ {
			from, to := rs[i][0], slices.Max(slices.Concat(rs[:i]...))
			// The events run again beyond the one in flight (from) first
			// entered after the first failover was asked for.
			for seq := from + 1; seq <= min(to, rs[i][len(rs[i])-1]); seq++ {
				if m, ok := entered(ms, "", seq); ok && m.At < asked.UnixMicro() {
					t.Errorf("%s: event %d, run again after the failover, first entered %v before it was asked for", k, seq, time.Duration(asked.UnixMicro()-m.At)*time.Microsecond)
				}
			}
		}
		if lost := missing(applied, last); len(lost) > failovers+1 {
			t.Errorf("%s: events %v are not applied on the new primary; at most one per failover may be lost", k, lost)
		}
		if ahead := committedAhead(applied); ahead > readAhead*(failovers+1) {
			t.Errorf("%s: %d events committed before an earlier one was (applied %s); at most ReadAhead (%d) per failover may", k, ahead, fmtSeqs(applied), readAhead)
		}
	}
	switch {
	case f.rewound():
	case f.s != nil:
		t.Errorf("no key ran an acked entry again in %d failovers: the bound was not shown to be reached", failovers)
	default:
		t.Logf("no key ran an acked entry again in %d forced cluster failovers (the old primaries lost nothing)", failovers)
	}
	f.checkAlive("i1", "i2")
}

// waitApplied waits until every key's applied log holds seq n or later
// (the optimistic state stops at an event a failover lost), on the
// primary the sentinels name.
func (f *failoverScene) waitApplied(n int) {
	f.c.t.Helper()
	for _, k := range failoverKeys {
		f.c.eventually(90*time.Second, fmt.Sprintf("%s applied through %d", k, n), func() bool {
			return f.onPrimary(func(p redis.UniversalClient) bool {
				a := appliedOn(f.c.ctx, p, k)
				return len(a) > 0 && slices.Max(a) >= n
			})
		})
	}
}

// waitSettled waits until every key is applied through n and the engines
// are done with it on the primary: every entry of its stream delivered to
// the handler's group and acked. Seq n applied is not enough after a
// failover: entries an owner read ahead from the old primary may commit
// on the new one before it runs the rewound entries again (seen: fo-1
// applied 1..192 and 291..300, checked while its owner was running
// 193..213 again, and reported as 77 events lost).
func (f *failoverScene) waitSettled(n int) {
	f.c.t.Helper()
	f.waitApplied(n)
	for _, k := range failoverKeys {
		stream := rdb.PartitionStream(Category, k)
		f.c.eventually(90*time.Second, fmt.Sprintf("every entry of %s delivered and acked", stream), func() bool {
			return f.onPrimary(func(p redis.UniversalClient) bool {
				st, err := p.XInfoStream(f.c.ctx, stream).Result()
				if err != nil {
					return false
				}
				gs, _ := p.XInfoGroups(f.c.ctx, stream).Result()
				g, ok := rdb.GroupOf(gs, group)
				return ok && g.Pending == 0 && g.LastDeliveredID == st.LastGeneratedID
			})
		})
	}
}

// onPrimary runs check on a client of the primary the sentinels name (on a
// cluster, the scene's client). For a moment after a failover the scene's
// client may still read the demoted primary, whose log a rewind on the new
// one has not caught up with yet: seen as events 264..300 of fo-1 "not
// applied on the new primary", checked while its new owner was still
// running them again.
func (f *failoverScene) onPrimary(check func(p redis.UniversalClient) bool) bool {
	if f.s == nil {
		return check(f.c.rdb)
	}
	addr, err := f.s.PrimaryAddr()
	if err != nil {
		return false
	}
	d := redis.NewClient(&redis.Options{Addr: addr})
	defer d.Close()
	return check(d)
}

// appliedOn returns the seqs of key's applied log on p, in commit order.
func appliedOn(ctx context.Context, p redis.UniversalClient, key string) []int {
	var out []int
	for _, rec := range p.LRange(ctx, appliedKey(key), 0, -1).Val() {
		seq, _ := strconv.Atoi(strings.SplitN(rec, "|", 2)[0])
		out = append(out, seq)
	}
	return out
}

// rewound reports whether some key's witness shows acked entries run
// again: a run that starts before the one in flight of the runs before.
func (f *failoverScene) rewound() bool {
	for _, k := range failoverKeys {
		rs := runs(enterSeqs(f.witnessed(k)))
		for i := 1; i < len(rs); i++ {
			if rs[i][0] < slices.Max(slices.Concat(rs[:i]...)) {
				return true
			}
		}
	}
	return false
}

// missing lists the seqs of 1..n not in applied.
func missing(applied []int, n int) []int {
	var out []int
	for s := 1; s <= n; s++ {
		if !slices.Contains(applied, s) {
			out = append(out, s)
		}
	}
	return out
}

// committedAhead counts the seqs whose first commit came before the first
// commit of a smaller seq.
func committedAhead(applied []int) int {
	first := map[int]bool{}
	var order []int
	for _, s := range applied {
		if !first[s] {
			first[s] = true
			order = append(order, s)
		}
	}
	n := 0
	for i, s := range order {
		for _, later := range order[i+1:] {
			if later < s {
				n++
				break
			}
		}
	}
	return n
}

// byOwner sums up, per instance and lease token in the witness's order,
// the seqs key's handler entered and the commits it saw succeed
// ("i1 <token>: entered 1..40, committed 1..40"): which owner's commits
// a failover lost.
func byOwner(ms []mark) string {
	type owner struct{ inst, token string }
	var order []owner
	seqs := map[owner]map[string][]int{}
	for _, m := range ms {
		if m.Phase != "enter" && m.Phase != "commit" {
			continue
		}
		o := owner{m.Instance, m.Token}
		if seqs[o] == nil {
			seqs[o] = map[string][]int{}
			order = append(order, o)
		}
		seqs[o][m.Phase] = append(seqs[o][m.Phase], m.Seq)
	}
	var parts []string
	for _, o := range order {
		parts = append(parts, fmt.Sprintf("%s %s: entered %s, committed %s", o.inst, o.token,
			fmtSeqs(seqs[o]["enter"]), fmtSeqs(seqs[o]["commit"])))
	}
	return strings.Join(parts, "; ")
}

// fmtRuns shows runs as "1..40,38..300".
func fmtRuns(rs [][]int) string {
	var parts []string
	for _, r := range rs {
		parts = append(parts, fmt.Sprintf("%d..%d", r[0], r[len(r)-1]))
	}
	return strings.Join(parts, ",")
}

// fmtSeqs shows seqs as runs.
func fmtSeqs(seqs []int) string { return fmtRuns(runs(slices.Clone(seqs))) }
