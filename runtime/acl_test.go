package runtime

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seqby/seqby/internal/logsink"
	"github.com/seqby/seqby/internal/redistest"
	"github.com/seqby/seqby/runtime/inspect"
	"github.com/seqby/seqby/runtime/internal/rdb"
)

// aclRules reads docs/operating.md's ACL SETUSER line for user, with PASSWORD and
// the "~CATEGORY ~CATEGORY:*" pair expanded for each of categories: the
// test runs under exactly the documented rules.
func aclRules(t *testing.T, user, password string, categories ...string) []string {
	t.Helper()
	readme, err := os.ReadFile("../docs/operating.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^ACL SETUSER ` + regexp.QuoteMeta(user) + ` (.*)$`).FindSubmatch(readme)
	if m == nil {
		t.Fatalf("docs/operating.md has no line ACL SETUSER %s ...", user)
	}
	var rules []string
	for _, r := range strings.Fields(string(m[1])) {
		switch r {
		case ">PASSWORD":
			rules = append(rules, ">"+password)
		case "~CATEGORY":
			for _, c := range categories {
				rules = append(rules, "~"+c)
			}
		case "~CATEGORY:*":
			for _, c := range categories {
				rules = append(rules, "~"+c+":*")
			}
		default:
			rules = append(rules, r)
		}
	}
	return rules
}

// syncBuffer is a log sink tests read while goroutines write to it.
type syncBuffer = logsink.Buffer

// The engine and seqbyctl's operations run under the least-privilege ACL
// users docs/operating.md documents, on a single Redis and on a cluster: every
// path (keyed, unkeyed, pm, a halt and its resolution) works, and nothing
// is refused: no NOPERM in the engine's logs or results, and an empty ACL
// LOG on every server (go-redis's own calls, such as a cluster client's
// COMMAND, show only there).
func TestUnderDocumentedACL(t *testing.T) {
	t.Run("standalone", func(t *testing.T) {
		s := redistest.New(t)
		underDocumentedACL(t, []*redistest.Server{s}, func(user string) redis.UniversalClient {
			return redis.NewClient(&redis.Options{Addr: s.Addr, Username: user, Password: user + "-secret", ContextTimeoutEnabled: true})
		})
	})
	t.Run("cluster", func(t *testing.T) {
		cl := redistest.NewCluster(t, 3)
		underDocumentedACL(t, cl.Nodes, func(user string) redis.UniversalClient {
			return redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs(), Username: user, Password: user + "-secret", ContextTimeoutEnabled: true})
		})
	})
	// The strict mode's barrier (SET, WAIT, INFO) and its Run check
	// (INFO, CONFIG GET) on a primary with a replica.
	t.Run("strict", func(t *testing.T) {
		s, _ := redistest.NewReplicated(t, 1)
		p := s.Nodes[0]
		underDocumentedACL(t, []*redistest.Server{p}, func(user string) redis.UniversalClient {
			return redis.NewClient(&redis.Options{Addr: p.Addr, Username: user, Password: user + "-secret", ContextTimeoutEnabled: true})
		}, func(o *Options) { o.ReplicaAcks = 1 })
	})
}

func underDocumentedACL(t *testing.T, servers []*redistest.Server, as func(user string) redis.UniversalClient, tweak ...func(*Options)) {
	ctx := ctxT(t)
	cats := []string{"order", "note", "pmorder", "pmpayment"}
	for _, s := range servers {
		for _, u := range []string{"seqby-engine", "seqbyctl"} {
			args := append([]string{"ACL", "SETUSER", u}, aclRules(t, u, u+"-secret", cats...)...)
			if _, err := s.Do(args...); err != nil {
				t.Fatalf("ACL SETUSER %s: %v", u, err)
			}
		}
		if _, err := s.Do("ACL", "LOG", "RESET"); err != nil {
			t.Fatal(err)
		}
	}
	client := func(user string) redis.UniversalClient {
		c := as(user)
		t.Cleanup(func() { c.Close() })
		return c
	}
	engine, ctl := client("seqby-engine"), client("seqbyctl")

	var logs syncBuffer
	j := newJournal()
	var poisoned atomic.Bool
	keyed := keyedHandler("orders", func(_ context.Context, e *testEvent) error {
		if e.Poison && !poisoned.Load() {
			return errPoison
		}
		j.enter(e.Client, seqKey(e.Client, e.Seq))
		j.leave(e.Client, seqKey(e.Client, e.Seq), e.Seq, true)
		return nil
	})
	var noted atomic.Int32
	notes := noteHandler("notes", func(context.Context, *testNote) error { noted.Add(1); return nil })
	flows := flowPM("flow", func(context.Context, string, string, *pmPayment) error { return nil })
	opts := fastOptions("acl1")
	opts.Retry.MaxRetries = -1
	opts.ReapAfter = 500 * time.Millisecond // the reaper runs under the ACL too
	opts.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	for _, f := range tweak {
		f(&opts)
	}
	r := startEngine(t, engine, opts, keyed, notes, flows)

	p := NewPublisher(engine, PublisherOptions{Logger: opts.Logger})
	const n = 5
	for i := 1; i <= n; i++ {
		for _, m := range []Message{&testEvent{Client: "a", Seq: i}, &testEvent{Client: "b", Seq: i, Poison: i == 1},
			&testNote{Text: "n"}, &pmOrder{OrderID: "o-1", Seq: i}, &pmPayment{OrderID: "o-1", Seq: i}} {
			if err := p.Publish(ctx, m); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := p.Publish(ctx, &testEvent{Client: "a", Seq: n + 1}, AsBackfill()); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "a applied, notes handled, o-1 complete", func() bool {
		f, _ := loadFlow(t, NewRedisStateStore(engine), "flow", "o-1")
		return j.count("a") == n+1 && noted.Load() == n && len(f.Orders) == n && len(f.Payments) == n
	})

	in := inspect.New(ctl)
	var hs []inspect.HaltRecord
	eventually(t, 20*time.Second, "b halted", func() bool {
		var err error
		hs, err = in.Halts(ctx, "")
		if err != nil {
			t.Fatalf("halts as seqbyctl: %v", err)
		}
		return len(hs) == 1
	})
	if _, err := in.Inspect(ctx, "orders", hs[0].Partition); err != nil {
		t.Fatalf("inspect as seqbyctl: %v", err)
	}
	if _, err := in.MoveToDLQ(ctx, "orders", hs[0].Partition, hs[0].EntryID); err != nil {
		t.Fatalf("dlq as seqbyctl: %v", err)
	}
	eventually(t, 20*time.Second, "b continues", func() bool { return j.count("b") == n-1 })
	if got := j.seqs("b"); !slices.Equal(got, seq(n)[1:]) {
		t.Errorf("b applied %v, want 2..%d", got, n)
	}
	for _, cat := range []string{"order", "pmorder", "pmpayment"} {
		eventually(t, 20*time.Second, cat+" reaped", func() bool {
			ks, err := rdb.Partitions(ctx, engine, cat)
			return err == nil && len(ks) == 0
		})
	}
	// An engine over a slow link stores its admitted confirmation age
	// (and WAITs for it in the strict mode), and Pause reads it as
	// seqbyctl (admitage.go).
	if err := rdb.StoreAdmitAgeAcked(ctx, engine, "orders", r.incarnation, 30*time.Millisecond, time.Second, opts.ReplicaAcks, opts.ReplicaTimeout); err != nil {
		t.Fatalf("storing the admitted age as seqby-engine: %v", err)
	}
	if a, err := rdb.AdmitAge(ctx, ctl, "orders"); err != nil || a != 30*time.Millisecond {
		t.Fatalf("reading the admitted age as seqbyctl: %v, %v", a, err)
	}
	r.stop()
	if strings.Contains(logs.String(), "NOPERM") {
		t.Fatalf("a command or key was refused under the documented ACL:\n%s", grepLines(logs.String(), "NOPERM"))
	}
	for _, s := range servers {
		admin := redis.NewClient(&redis.Options{Addr: s.Addr})
		log, err := admin.Do(ctx, "ACL", "LOG").Slice()
		admin.Close()
		if err != nil || len(log) > 0 {
			t.Fatalf("ACL LOG of %s: %v, %v; want nothing refused", s.Addr, log, err)
		}
	}
	// The users really are restricted: another key is refused, and
	// seqbyctl cannot take a lease.
	if err := engine.Set(ctx, "elsewhere", "x", 0).Err(); err == nil || !strings.Contains(err.Error(), "NOPERM") {
		t.Fatalf("SET elsewhere as seqby-engine: %v, want NOPERM", err)
	}
	// (seqbyctl has SET for the note a resolve leaves the halted owner,
	// so it is restricted by what it cannot consume or renew.)
	if err := ctl.PExpire(ctx, "order:{a}:__lease__:orders", time.Minute).Err(); err == nil || !strings.Contains(err.Error(), "NOPERM") {
		t.Fatalf("renewing a lease as seqbyctl: %v, want NOPERM", err)
	}
	if err := ctl.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "orders", Consumer: "ctl", Streams: []string{"order:{a}", ">"}, Count: 1, Block: -1}).Err(); err == nil || !strings.Contains(err.Error(), "NOPERM") {
		t.Fatalf("consuming as seqbyctl: %v, want NOPERM", err)
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return fmt.Sprint(strings.Join(out, "\n"))
}
