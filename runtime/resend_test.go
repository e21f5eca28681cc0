package runtime

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seqby/seqby/internal/redistest"
	"github.com/seqby/seqby/runtime/internal/rdb"
)

// The resend suite: every call may run twice. go-redis resends a command
// or a pipeline whose reply it failed to read (io.EOF, a reset, a read
// timeout) although Redis may have run it, and proxies and redirects
// replay calls. For one kind of call at a time, the engines' and the
// publisher's client loses the reply of a few such calls after Redis ran
// them (redistest.LostReply), and the suite asserts, per key: every event
// stored once, run in publish order (an event may run again, never one
// before an earlier one has run), never two different events of the key
// in handlers at once, nothing lost.

// resendKind is a kind of call whose reply the suite loses.
type resendKind struct {
	name  string
	match redistest.Match
	// in lists the modes that send this kind of call (where the suite
	// requires that a reply was lost).
	in []resendMode
}

type resendMode string

const (
	resendKeyed   resendMode = "keyed"
	resendBatched resendMode = "batched"
	resendPM      resendMode = "pm"
)

var resendModes = []resendMode{resendKeyed, resendBatched, resendPM}

// runsScript matches EVALSHA or EVAL calls of the scripts named (their
// files in rdb's lua/).
func runsScript(names ...string) redistest.Match {
	return func(args []string) bool {
		if len(args) < 2 || !strings.HasPrefix(strings.ToLower(args[0]), "eval") {
			return false
		}
		return slices.Contains(names, rdb.ScriptName(args[1]))
	}
}

// roundOp matches round calls carrying a slice of op (round.lua's
// ARGV: S, U, then per slice a header of 8 values and its ack ids).
func roundOp(op rdb.RoundOp) redistest.Match {
	isRound := runsScript("round")
	return func(args []string) bool {
		if !isRound(args) || len(args) < 3 {
			return false
		}
		nk, err := strconv.Atoi(args[2])
		if err != nil {
			return false
		}
		a := 3 + nk
		if a+1 >= len(args) {
			return false
		}
		slices, _ := strconv.Atoi(args[a])
		a += 2
		for range slices {
			if a+6 >= len(args) {
				return false
			}
			if args[a] == string(op) {
				return true
			}
			nack, _ := strconv.Atoi(args[a+6])
			a += 8 + nack
		}
		return false
	}
}

// plainRead matches a partition's plain read of new entries through its
// generation's group (rdb/plain.go).
func plainRead(args []string) bool {
	return command("XREADGROUP")(args) && len(args) > 2 && strings.Contains(args[2], "@") && args[len(args)-1] == ">"
}

// plainAck matches a partition's plain ack through its generation's
// group.
func plainAck(args []string) bool {
	return command("XACK")(args) && len(args) > 2 && strings.Contains(args[2], "@")
}

// command matches a plain command by name.
func command(name string) redistest.Match {
	return func(args []string) bool { return strings.EqualFold(args[0], name) }
}

var resendKinds = []resendKind{
	{"acquire", runsScript("acquire"), resendModes},
	{"renew", runsScript("renew", "renew_many"), resendModes},
	{"round-read", roundOp(rdb.RoundRead), []resendMode{resendKeyed, resendBatched}},
	{"round-oldest", roundOp(rdb.RoundReadOldest), []resendMode{resendPM}},
	// A partition's read of new entries after its generation's first
	// goes as plain commands (rdb/plain.go), so round.lua's read-new
	// runs only after an unclean answer: run, not required.
	{"round-new", roundOp(rdb.RoundReadNew), nil},
	{"plain-read", plainRead, []resendMode{resendKeyed, resendBatched}},
	{"round-ack", roundOp(rdb.RoundAck), []resendMode{resendPM}},
	{"plain-ack", plainAck, []resendMode{resendKeyed, resendBatched}},
	// A verification goes only when a confirmation grew older than
	// VerifyBound, which timing decides: run, not required.
	{"verify", func(args []string) bool { return roundOp(rdb.RoundVerify)(args) || runsScript("verify")(args) }, nil},
	{"release", runsScript("release", "release_cold"), resendModes},
	{"reclaim", runsScript("reclaim"), resendModes},
	{"halt", runsScript("record_halt", "clear_halt"), resendModes},
	{"begin-attempt", runsScript("begin_attempt"), resendModes},
	{"save-state", runsScript("save_state"), []resendMode{resendPM}},
	{"publish", appends, resendModes},
	{"publish-batch", appends, resendModes},
}

// appends matches the calls that append a published event: a MULTI/EXEC
// (a single Redis), an XADD or an append_once script (a cluster).
func appends(args []string) bool {
	return command("EXEC")(args) || command("XADD")(args) || runsScript("append_once")(args)
}

// resendTopology is one Redis deployment the suite runs on: it makes
// clients that lose replies through l.
type resendTopology struct {
	name   string
	client func(t *testing.T, l *redistest.LostReply) redis.UniversalClient
}

// resendTopologies start their servers once, for the whole of t, when a
// subtest first asks for a client.
func resendTopologies(t *testing.T) []resendTopology {
	top := t
	var (
		once   sync.Once
		server *redistest.Server
	)
	var (
		conce   sync.Once
		cluster *redistest.Cluster
	)
	return []resendTopology{
		{"standalone", func(t *testing.T, l *redistest.LostReply) redis.UniversalClient {
			once.Do(func() { server = redistest.New(top) })
			c := redis.NewClient(&redis.Options{Addr: server.Addr, ContextTimeoutEnabled: true, Dialer: l.Dialer(nil)})
			t.Cleanup(func() { c.Close() })
			return c
		}},
		{"cluster", func(t *testing.T, l *redistest.LostReply) redis.UniversalClient {
			conce.Do(func() { cluster = redistest.NewCluster(top, 3) })
			c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cluster.Addrs(), ContextTimeoutEnabled: true, Dialer: l.Dialer(nil)})
			t.Cleanup(func() { c.Close() })
			return c
		}},
	}
}

// TestResentCalls runs the resend suite on a single Redis and on a
// cluster, for keyed handlers, the batched mode and a sequential pm.
func TestResentCalls(t *testing.T) {
	for _, top := range resendTopologies(t) {
		t.Run(top.name, func(t *testing.T) {
			for i, kind := range resendKinds {
				fault := redistest.Faults[i%len(redistest.Faults)]
				for _, mode := range resendModes {
					t.Run(kind.name+"/"+string(mode)+"/"+fault.String(), func(t *testing.T) {
						var l redistest.LostReply
						c := top.client(t, &l)
						runResent(t, c, &l, kind, mode, fault, fmt.Sprintf("%s-%d-%s", top.name, i, mode))
					})
				}
			}
		})
	}
}

// runResent publishes events of a few keys, runs them on two engines
// (the first stops halfway, handing its partitions over), losing the
// replies of kind's calls, and checks the promise per key.
func runResent(t *testing.T, c redis.UniversalClient, l *redistest.LostReply, kind resendKind, mode resendMode, fault redistest.Fault, id string) {
	ctx := ctxT(t)
	const n = 48
	keys := []string{id + "-a", id + "-b", id + "-c"}
	j := newJournal()
	var mu sync.Mutex
	entries := map[string]map[int]map[string]bool{} // key -> seq -> entries run
	enter := func(ctx context.Context, key string, seq int) func() {
		mi, _ := MessageFromContext(ctx)
		mu.Lock()
		if entries[key] == nil {
			entries[key] = map[int]map[string]bool{}
		}
		if entries[key][seq] == nil {
			entries[key][seq] = map[string]bool{}
		}
		entries[key][seq][mi.Stream+"/"+mi.EntryID] = true
		mu.Unlock()
		ev := strconv.Itoa(seq)
		j.enter(key, ev)
		return func() { j.leave(key, ev, seq, true) }
	}
	// Each key's first two runs of seq 5 fail: the partition halts (no
	// retries), and its head's slow retry (begin_attempt) fails once more
	// before one succeeds.
	failed := map[string]int{}
	failOnce := func(key string, seq int) error {
		mu.Lock()
		defer mu.Unlock()
		if seq == 5 && failed[key] < 2 {
			failed[key]++
			return fmt.Errorf("run %d of %s/%d fails", failed[key], key, seq)
		}
		return nil
	}
	name := "resend-" + id
	var reg Registration
	switch mode {
	case resendKeyed, resendBatched:
		reg = keyedHandler(name, func(ctx context.Context, e *testEvent) error {
			defer enter(ctx, e.Client, e.Seq)()
			return failOnce(e.Client, e.Seq)
		})
		if mode == resendBatched {
			reg.AckBatch = 4
		}
	case resendPM:
		reg = flowPM(name, func(ctx context.Context, corr, event string, p *pmPayment) error {
			seq, _ := strconv.Atoi(event[strings.IndexByte(event, '/')+1:])
			if p == nil {
				return nil // orders: the state says they ran in order
			}
			defer enter(ctx, corr, seq)()
			return failOnce(corr, seq)
		})
	}
	pub := NewPublisher(c)
	publish := func(from, to int) {
		for seq := from; seq <= to; seq++ {
			if kind.name == "publish-batch" {
				var msgs []Message
				for _, k := range keys {
					if mode == resendPM {
						msgs = append(msgs, &pmOrder{OrderID: k, Seq: seq}, &pmPayment{OrderID: k, Seq: seq})
					} else {
						msgs = append(msgs, ev(k, seq))
					}
				}
				if err := pub.PublishBatch(ctx, msgs); err != nil {
					t.Fatalf("publish batch %d: %v", seq, err)
				}
				continue
			}
			for _, k := range keys {
				var err error
				if mode == resendPM {
					if err = pub.Publish(ctx, &pmOrder{OrderID: k, Seq: seq}); err == nil {
						err = pub.Publish(ctx, &pmPayment{OrderID: k, Seq: seq})
					}
				} else {
					err = pub.Publish(ctx, ev(k, seq))
				}
				if err != nil {
					t.Fatalf("publish %s/%d: %v", k, seq, err)
				}
			}
		}
	}
	l.Arm(kind.match, fault, 3)
	// Half the events wait when the engines start: a backlog deeper than
	// a read, so reads come full and a batched partition prefetches.
	publish(1, n/2)
	options := func(owner string) Options {
		o := fastOptions(owner)
		o.ReadAhead = 8
		o.Retry.MaxRetries = -1
		o.Retry.HaltedRetryInterval = 20 * time.Millisecond
		return o
	}
	first := startEngine(t, c, options(id+"-1"), reg)
	startEngine(t, c, options(id+"-2"), reg)
	eventually(t, 30*time.Second, "a quarter run", func() bool {
		for _, k := range keys {
			if j.count(k) < n/4 {
				return false
			}
		}
		return true
	})
	// The first engine stops: its partitions go over to the second,
	// which reclaims what it held. The rest is published meanwhile.
	stopped := make(chan struct{})
	go func() { first.stop(); close(stopped) }()
	publish(n/2+1, n)
	<-stopped
	eventually(t, 60*time.Second, "every event run", func() bool {
		for _, k := range keys {
			if !slices.Contains(j.seqs(k), n) {
				return false
			}
		}
		return true
	})
	if slices.Contains(kind.in, mode) && l.Lost() == 0 {
		t.Errorf("no %s call lost its reply: the test saw nothing", kind.name)
	}
	l.Disarm()
	if len(j.overlap) > 0 {
		t.Errorf("two events of a key in handlers at once: %v", j.overlap)
	}
	for _, k := range keys {
		if ran := j.seqs(k); !noSkips(ran, n) {
			t.Errorf("%s ran %v, want 1..%d in order (an event may run again, none before an earlier one)", k, ran, n)
		}
		mu.Lock()
		for seq, es := range entries[k] {
			if len(es) != 1 {
				t.Errorf("%s/%d ran as %d entries %v, want one: each event stored once", k, seq, len(es), es)
			}
		}
		mu.Unlock()
	}
	if mode == resendPM {
		store := NewRedisStateStore(c)
		for _, k := range keys {
			eventually(t, 30*time.Second, "the state of "+k+" saved", func() bool {
				f, _ := loadFlow(t, store, name, k)
				return len(f.Orders) >= n && len(f.Payments) >= n
			})
			f, _ := loadFlow(t, store, name, k)
			if !slices.Equal(f.Orders, seq(n)) || !slices.Equal(f.Payments, seq(n)) {
				t.Errorf("%s: saved state %+v, want orders and payments 1..%d once each, in order", k, f, n)
			}
		}
	}
}

// noSkips reports whether ran holds every seq 1..n and never runs one
// before every earlier one has run: an event may run again (at least
// once), but none out of publish order.
func noSkips(ran []int, n int) bool {
	top := 0
	for _, s := range ran {
		if s > top+1 {
			return false
		}
		top = max(top, s)
	}
	return top == n
}

// An engine whose acquire of the maintenance lease Redis ran twice leads
// with the lease it holds: the reaper (then with a lease per category)
// used to take its own lease for another's, skip the pass, and leave
// every reaper blocked for LeaseTTL.
func TestMaintenanceLeaseAcquiredTwice(t *testing.T) {
	s := redistest.New(t)
	ctx := ctxT(t)
	var l redistest.LostReply
	c := redis.NewClient(&redis.Options{Addr: s.Addr, ContextTimeoutEnabled: true, Dialer: l.Dialer(nil)})
	t.Cleanup(func() { c.Close() })
	reaper := rdb.MaintenanceLease().Key
	l.Arm(func(args []string) bool { return runsScript("acquire")(args) && slices.Contains(args, reaper) }, redistest.EOF, 1)
	j := newJournal()
	h := keyedHandler("reaped", func(_ context.Context, e *testEvent) error {
		j.enter(e.Client, seqKey(e.Client, e.Seq))
		j.leave(e.Client, seqKey(e.Client, e.Seq), e.Seq, true)
		return nil
	})
	opts := fastOptions("reaper-twice")
	opts.ReapAfter = 300 * time.Millisecond
	// A blocked maintenance lease would outlast the test's wait.
	opts.LeaseTTL = time.Minute
	startEngine(t, c, opts, h)
	if err := NewPublisher(c).Publish(ctx, ev("k", 1)); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "the event handled", func() bool { return j.count("k") == 1 })
	eventually(t, 20*time.Second, "the partition reaped", func() bool {
		ks, err := rdb.Partitions(ctx, c, "order")
		return err == nil && len(ks) == 0 && l.Lost() == 1
	})
}
