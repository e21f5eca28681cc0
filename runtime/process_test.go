package runtime

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seqby/seqby/runtime/internal/rdb"
)

// The test binary doubles as an engine process: with SEQBY_TEST_WORKER set
// it runs one engine instance until SIGTERM. This lets the suite below
// SIGKILL and SIGSTOP real owners.
func TestMain(m *testing.M) {
	if owner := os.Getenv("SEQBY_TEST_WORKER"); owner != "" {
		os.Exit(workerMain(owner, os.Getenv("SEQBY_TEST_REDIS")))
	}
	os.Exit(m.Run())
}

// commitScript appends seq to the key's applied list only while the lease
// still holds the handler's token: a fenced effect.
var commitScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('RPUSH', KEYS[2], ARGV[2])
return 1
`)

func appliedKey(key string) string { return "{" + rdb.PartitionStream("order", key) + "}:applied" }

// The crash leg kills b's owner while it is inside event gateSeq of key
// gateClient: the worker's handler records its token in arrivedKey, then
// waits until the test appends to gateKey (after the kill), so the crash
// always leaves that event in flight for the next owner to reclaim.
const (
	processEvents = 60
	gateClient    = "b"
	gateSeq       = processEvents / 2
	gateKey       = "{test}:gate"
)

var arrivedKey = "{" + rdb.PartitionStream("order", gateClient) + "}:arrived"

// waitGate blocks the handler until the gate stream has an entry (XREAD
// from 0 consumes nothing: every waiter, in any process, sees it).
func waitGate(ctx context.Context, c *redis.Client) error {
	for {
		res, err := c.XRead(ctx, &redis.XReadArgs{Streams: []string{gateKey, "0-0"}, Count: 1, Block: 200 * time.Millisecond}).Result()
		if len(res) > 0 {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil && !errors.Is(err, redis.Nil) {
			return err
		}
	}
}

func workerMain(owner, addr string) int {
	c := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	defer c.Close()
	h := keyedHandler("orders", func(ctx context.Context, e *testEvent) error {
		li, _ := LeaseFromContext(ctx)
		if e.Client == gateClient && e.Seq == gateSeq {
			if err := c.RPush(ctx, arrivedKey, li.Token).Err(); err != nil {
				return err
			}
			if err := waitGate(ctx, c); err != nil {
				return err
			}
		}
		time.Sleep(10 * time.Millisecond) // a handler doing some work
		n, err := commitScript.Run(ctx, c, []string{li.LeaseKey, appliedKey(e.Client)}, li.Token, e.Seq).Int()
		if err != nil {
			return err
		}
		if n != 1 {
			return ErrLeaseLost
		}
		return nil
	})
	opts := fastOptions(owner)
	opts.Logger = nil
	e, err := NewEngine(c, opts)
	if err == nil {
		err = e.Register(h)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	if err := e.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

func startWorker(t *testing.T, owner, addr string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "SEQBY_TEST_WORKER="+owner, "SEQBY_TEST_REDIS="+addr)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if testing.Verbose() {
		cmd.Stderr = os.Stderr
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGCONT)
		cmd.Process.Kill()
		cmd.Wait()
	})
	return cmd
}

func TestProcessesStallAndCrashKeepOrder(t *testing.T) {
	c, ctx := newRedis(t), ctxT(t)
	addr := c.Options().Addr
	const n = processEvents
	keys := []string{"a", "b", "c"}
	p := NewPublisher(c, PublisherOptions{})
	for i := 1; i <= n; i++ {
		for _, k := range keys {
			if err := p.Publish(ctx, ev(k, i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	procs := map[string]*exec.Cmd{"w1": startWorker(t, "w1", addr), "w2": startWorker(t, "w2", addr)}
	ownerOf := func(key string) string {
		tok := c.Get(ctx, rdb.PartitionLease(rdb.PartitionStream("order", key), "orders").Key).Val()
		o, _, _ := rdb.ParseToken(tok)
		return o
	}
	applied := func(key string) int { return int(c.LLen(ctx, appliedKey(key)).Val()) }

	// Stall the owner of a past its lease: the other takes over.
	eventually(t, 20*time.Second, "a in progress", func() bool { return applied("a") > 0 && ownerOf("a") != "" })
	stalled := ownerOf("a")
	procs[stalled].Process.Signal(syscall.SIGSTOP)
	eventually(t, 20*time.Second, "a taken over", func() bool { o := ownerOf("a"); return o != "" && o != stalled })
	before := applied("a")
	eventually(t, 20*time.Second, "a progresses under the new owner", func() bool { return applied("a") > before })
	procs[stalled].Process.Signal(syscall.SIGCONT)

	// Crash the owner of b while it is inside event gateSeq: the event is
	// in flight, so its next owner must reclaim it and run it first.
	bLease := rdb.PartitionLease(rdb.PartitionStream("order", gateClient), "orders").Key
	eventually(t, 20*time.Second, "b's owner inside event gateSeq", func() bool {
		tok := c.Get(ctx, bLease).Val()
		last := c.LRange(ctx, arrivedKey, -1, -1).Val()
		return tok != "" && len(last) == 1 && last[0] == tok
	})
	if got := applied(gateClient); got != gateSeq-1 {
		t.Fatalf("precondition: b applied %d events before the crash, want %d", got, gateSeq-1)
	}
	crashedToken := c.Get(ctx, bLease).Val()
	crashed, _, _ := rdb.ParseToken(crashedToken)
	procs[crashed].Process.Kill()
	procs[crashed].Wait()
	delete(procs, crashed)
	// Keep two instances: start a replacement, then let b's event through.
	procs["w3"] = startWorker(t, "w3", addr)
	if err := c.XAdd(ctx, &redis.XAddArgs{Stream: gateKey, Values: []any{"open", "1"}}).Err(); err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		eventually(t, 30*time.Second, "key "+k+" done", func() bool {
			seqs := c.LRange(ctx, appliedKey(k), 0, -1).Val()
			return len(seqs) > 0 && seqs[len(seqs)-1] == strconv.Itoa(n)
		})
		var got []int
		for _, s := range c.LRange(ctx, appliedKey(k), 0, -1).Val() {
			v, _ := strconv.Atoi(s)
			got = append(got, v)
		}
		if !inOrder(got, n) {
			t.Errorf("key %s committed %v, want 1..%d in order (one re-run allowed)", k, got, n)
		}
	}
	// The crash leg ran: event gateSeq of b was reclaimed and run again by
	// another owner than the crashed one.
	arrived := c.LRange(ctx, arrivedKey, 0, -1).Val()
	if len(arrived) < 2 {
		t.Errorf("b's event %d ran under %v; want a run by a new owner after %s crashed in it", gateSeq, arrived, crashedToken)
	} else if o, _, _ := rdb.ParseToken(arrived[len(arrived)-1]); o == crashed {
		t.Errorf("b's event %d last ran under the crashed owner %s (%v)", gateSeq, crashed, arrived)
	}
	for _, cmd := range procs {
		cmd.Process.Signal(syscall.SIGTERM)
	}
	for name, cmd := range procs {
		if err := cmd.Wait(); err != nil {
			t.Errorf("worker %s after SIGTERM: %v", name, err)
		}
	}
}
