package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rogpeppe/go-internal/testscript"
	"github.com/seqby/seqby/internal/redistest"
	"github.com/seqby/seqby/runtime"
	"github.com/seqby/seqby/runtime/inspect"
)

var update = flag.Bool("update", false, "rewrite the cmp goldens of testdata/script/*.txtar with the actual output")

func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"seqbyctl": func() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) },
		// status N seqbyctl ARGS... runs seqbyctl and fails unless it
		// exits N: testscript itself only tells zero from non-zero.
		"status": func() { os.Exit(status(os.Args[1:])) },
	})
}

func status(args []string) int {
	want, err := strconv.Atoi(args[0])
	if err != nil || len(args) < 2 || args[1] != "seqbyctl" {
		fmt.Fprintln(os.Stderr, "usage: status N seqbyctl ARGS...")
		return 1
	}
	if got := run(args[2:], os.Stdout, os.Stderr); got != want {
		fmt.Fprintf(os.Stderr, "status: seqbyctl exited %d, want %d\n", got, want)
		return 1
	}
	return 0
}

// TestScripts runs testdata/script/*.txtar: the command line against a
// real redis-server of its own per script, named by $REDIS_URL. The
// commands below seed and watch it from the test process:
//
//	engine                   run an engine with handler "orders" on category shop
//	publish CLIENT SEQ [poison]  publish a placed message of shop
//	cure                     the handler applies poison messages from now on
//	waithalts N              wait until N partitions are listed halted
//	applied CLIENT SEQS      wait until the handler applied exactly SEQS (1,2 or -) for CLIENT
//	entryid VAR STREAM N     set $VAR to the id of STREAM's entry N (0 first, -1 last)
//	redis ARGS...            run a Redis command; print its reply, one value a line
//	closedport VAR           set $VAR to a loopback port nothing listens on
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir:           "testdata/script",
		UpdateScripts: *update,
		Setup: func(env *testscript.Env) error {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			s, err := redistest.Start(ctx)
			if err != nil {
				return err
			}
			env.Defer(func() { s.Close() })
			env.Setenv("REDIS_URL", "redis://"+s.Addr)
			// The audit stream records who: a fixed one, for the scripts.
			env.Setenv("USER", "tester")
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"engine":     cmdEngine,
			"publish":    cmdPublish,
			"cure":       func(ts *testscript.TestScript, _ bool, _ []string) { worldOf(ts).cured.Store(true) },
			"waithalts":  cmdWaitHalts,
			"applied":    cmdApplied,
			"entryid":    cmdEntryID,
			"group":      cmdGroup,
			"redis":      cmdRedis,
			"closedport": cmdClosedPort,
		},
	})
}

// world is one script's Redis client, engine and what its handler did.
type world struct {
	c       redis.UniversalClient
	applied *applied
	cured   atomic.Bool
}

var worlds sync.Map // *testscript.TestScript -> *world

func worldOf(ts *testscript.TestScript) *world {
	if w, ok := worlds.Load(ts); ok {
		return w.(*world)
	}
	opt, err := redis.ParseURL(ts.Getenv("REDIS_URL"))
	ts.Check(err)
	w := &world{c: redis.NewClient(opt), applied: &applied{seqs: map[string][]int{}}}
	worlds.Store(ts, w)
	ts.Defer(func() { w.c.Close(); worlds.Delete(ts) })
	return w
}

func cmdEngine(ts *testscript.TestScript, neg bool, _ []string) {
	w := worldOf(ts)
	stop, err := runEngine(w.c, haltingRegistration("orders", w.applied, &w.cured))
	ts.Check(err)
	ts.Defer(stop)
}

func cmdPublish(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) < 2 {
		ts.Fatalf("usage: publish CLIENT SEQ [poison]")
	}
	seq, err := strconv.Atoi(args[1])
	ts.Check(err)
	m := &placed{Client: args[0], Seq: seq, Poison: len(args) > 2 && args[2] == "poison"}
	ts.Check(runtime.NewPublisher(worldOf(ts).c).Publish(context.Background(), m))
}

// poll waits for cond, failing the script after 20s.
func poll(ts *testscript.TestScript, what string, cond func() (bool, string)) {
	deadline := time.Now().Add(20 * time.Second)
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			ts.Fatalf("timed out waiting for %s; last seen: %s", what, state)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func cmdWaitHalts(ts *testscript.TestScript, neg bool, args []string) {
	want, err := strconv.Atoi(args[0])
	ts.Check(err)
	in := inspect.New(worldOf(ts).c)
	poll(ts, args[0]+" halts", func() (bool, string) {
		hs, err := in.Halts(context.Background(), "")
		return err == nil && len(hs) == want, fmt.Sprintf("%d halts, %v", len(hs), err)
	})
}

func cmdApplied(ts *testscript.TestScript, neg bool, args []string) {
	var want []int
	if args[1] != "-" {
		for _, s := range strings.Split(args[1], ",") {
			n, err := strconv.Atoi(s)
			ts.Check(err)
			want = append(want, n)
		}
	}
	a := worldOf(ts).applied
	poll(ts, "applied "+args[0]+" "+args[1], func() (bool, string) {
		got := a.get(args[0])
		return slices.Equal(got, want), fmt.Sprint(got)
	})
}

func cmdEntryID(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 3 {
		ts.Fatalf("usage: entryid VAR STREAM N")
	}
	n, err := strconv.Atoi(args[2])
	ts.Check(err)
	msgs, err := worldOf(ts).c.XRange(context.Background(), args[1], "-", "+").Result()
	ts.Check(err)
	if n < 0 {
		n += len(msgs)
	}
	if n < 0 || n >= len(msgs) {
		ts.Fatalf("%s has %d entries, no entry %s", args[1], len(msgs), args[2])
	}
	ts.Setenv(args[0], msgs[n].ID)
}

// cmdGroup sets VAR to HANDLER's consumer group on STREAM: its lease
// generation's (HANDLER@<generation>), a parked one's, or the shared one.
func cmdGroup(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 3 {
		ts.Fatalf("usage: group VAR STREAM HANDLER")
	}
	gs, err := worldOf(ts).c.XInfoGroups(context.Background(), args[1]).Result()
	ts.Check(err)
	for _, g := range gs {
		if g.Name == args[2] || strings.HasPrefix(g.Name, args[2]+"@") {
			ts.Setenv(args[0], g.Name)
			return
		}
	}
	ts.Fatalf("%s has no consumer group of %s", args[1], args[2])
}

func cmdClosedPort(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 1 {
		ts.Fatalf("usage: closedport VAR")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	ts.Check(err)
	port := l.Addr().(*net.TCPAddr).Port
	ts.Check(l.Close())
	ts.Setenv(args[0], strconv.Itoa(port))
}

func cmdRedis(ts *testscript.TestScript, neg bool, args []string) {
	cmd := make([]any, len(args))
	for i, a := range args {
		cmd[i] = a
	}
	v, err := worldOf(ts).c.Do(context.Background(), cmd...).Result()
	if err == redis.Nil {
		v, err = "(nil)", nil
	}
	if neg != (err != nil) {
		ts.Fatalf("redis %s: %v", strings.Join(args, " "), err)
	}
	printReply(ts, v)
}

func printReply(ts *testscript.TestScript, v any) {
	switch v := v.(type) {
	case []any:
		for _, x := range v {
			printReply(ts, x)
		}
	case map[any]any:
		for k, x := range v {
			fmt.Fprintln(ts.Stdout(), k)
			printReply(ts, x)
		}
	default:
		fmt.Fprintln(ts.Stdout(), v)
	}
}
