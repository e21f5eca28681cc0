package outbox_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// relayProc is a relay running as a separate OS process (the test binary
// re-executed with relayProcEnv set), whose JSON log lines the test reads.
type relayProc struct {
	t     *testing.T
	owner string
	cmd   *exec.Cmd
	done  chan struct{}
	mu    sync.Mutex
	lines []map[string]any
	errb  strings.Builder
}

// startRelayProc starts a relay process on e's database and Redis. delay
// slows each publish, so a test can act in the middle of a batch; env
// adds variables (OUTBOX_GATE, OUTBOX_HANG_AFTER: see relayProcMain).
func startRelayProc(t *testing.T, e *env, owner string, ttl, delay time.Duration, batch int, env ...string) *relayProc {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), relayProcEnv+"=1", "OUTBOX_DIALECT="+e.d.String(), "OUTBOX_DSN="+e.dsn,
		"OUTBOX_REDIS="+e.redis.Addr, "OUTBOX_OWNER="+owner, "OUTBOX_TTL="+ttl.String(),
		"OUTBOX_DELAY="+delay.String(), fmt.Sprintf("OUTBOX_BATCH=%d", batch))
	cmd.Env = append(cmd.Env, env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	p := &relayProc{t: t, owner: owner, cmd: cmd, done: make(chan struct{})}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = &lockedBuilder{mu: &p.mu, b: &p.errb}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) != nil {
				m = map[string]any{"msg": "raw", "raw": sc.Text()}
			}
			p.mu.Lock()
			p.lines = append(p.lines, m)
			p.mu.Unlock()
		}
		cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.signal(syscall.SIGCONT)
		p.signal(syscall.SIGKILL)
		<-p.done
		if t.Failed() {
			p.mu.Lock()
			defer p.mu.Unlock()
			t.Logf("relay %s: %d log lines; stderr: %s", owner, len(p.lines), p.errb.String())
			for _, l := range p.lines {
				if l["msg"] != "outbox: publishing" && l["msg"] != "published" {
					t.Logf("relay %s: %v", owner, l)
				}
			}
		}
	})
	return p
}

type lockedBuilder struct {
	mu *sync.Mutex
	b  *strings.Builder
}

func (w *lockedBuilder) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (p *relayProc) signal(s syscall.Signal) {
	select {
	case <-p.done:
	default:
		p.cmd.Process.Signal(s)
	}
}

// stopped reports whether the process is stopped (state T in
// /proc/PID/stat).
func (p *relayProc) stopped() bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid))
	if err != nil {
		return false
	}
	// pid (comm) state ...: comm may hold spaces; the state follows ") ".
	s := string(b)
	i := strings.LastIndex(s, ") ")
	return i >= 0 && len(s) > i+2 && s[i+2] == 'T'
}

// kill SIGKILLs the relay and waits for it to be gone.
func (p *relayProc) kill() {
	p.signal(syscall.SIGKILL)
	<-p.done
}

// logged returns the log lines with message msg.
func (p *relayProc) logged(msg string) []map[string]any {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []map[string]any
	for _, l := range p.lines {
		if l["msg"] == msg {
			out = append(out, l)
		}
	}
	return out
}

func (p *relayProc) count(msg string) int { return len(p.logged(msg)) }

// ids returns the message_id of the lines with message msg.
func (p *relayProc) ids(msg string) map[string]bool {
	out := map[string]bool{}
	for _, l := range p.logged(msg) {
		if id, ok := l["message_id"].(string); ok {
			out[id] = true
		}
	}
	return out
}

// addOrders adds n records to each key, interleaved, each in its own
// business transaction.
func addOrders(t *testing.T, e *env, keys []string, n int) {
	t.Helper()
	for i := 1; i <= n; i++ {
		for _, k := range keys {
			if err := e.placeOrder(context.Background(), fmt.Sprintf("%s-%d", k, i), &placed{Client: k, Seq: i}); err != nil {
				t.Error(err)
				return
			}
		}
	}
}

// checkStreams fails unless each key's stream holds 1..n, in order, once
// each.
func checkStreams(t *testing.T, e *env, keys []string, n int) {
	t.Helper()
	for _, k := range keys {
		if got := seqs(e.stream(t, "order:{"+k+"}")); !slices.Equal(got, upTo(n)) {
			t.Errorf("stream of %s: %v, want 1..%d in order, once each", k, got, n)
		}
	}
}

// TestProcessRelayKilledMidBatch: a relay SIGKILLed in the middle of a
// batch, some records published but not yet marked, and a relay started
// after it: nothing is lost, nothing reordered, and every record is in
// its stream once (the successor's re-publishes are deduplicated by
// message id). A hangs once it has published 20 records (OUTBOX_HANG_AFTER),
// so the kill always leaves those 20 published and unmarked: the dedup
// path is exercised every run.
func TestProcessRelayKilledMidBatch(t *testing.T) {
	dialects(t, func(t *testing.T, e *env) {
		keys := []string{"c-1", "c-2", "c-3"}
		const n = 40
		addOrders(t, e, keys, n)
		for i := 1; i <= n; i++ { // and an unpartitioned category
			if _, err := e.ob.Add(context.Background(), e.db, &note{Seq: i}); err != nil {
				t.Fatal(err)
			}
		}
		a := startRelayProc(t, e, "A", time.Second, 5*time.Millisecond, 50, "OUTBOX_HANG_AFTER=20")
		eventually(t, 20*time.Second, "A to publish 20 records and hang", func() bool {
			return a.count("published") >= 20 && a.count("hanging") > 0
		})
		a.kill()
		left := e.pending(t)
		if left == 0 {
			t.Fatal("A published everything before it was killed: the test proves nothing")
		}
		// Published by A but still PENDING: the successor must publish
		// them again, and the stream must store them once.
		var unmarked []string
		for id := range a.ids("published") {
			if e.count(t, `SELECT count(*) FROM seqby_outbox WHERE message_id = ? AND status = 'PENDING'`, id) == 1 {
				unmarked = append(unmarked, id)
			}
		}
		t.Logf("A killed after %d publishes; %d records pending, %d of them published by A but unmarked",
			a.count("published"), left, len(unmarked))
		if len(unmarked) == 0 {
			t.Fatal("A left no record published but unmarked: the re-publish and its deduplication are not exercised")
		}
		b := startRelayProc(t, e, "B", time.Second, 0, 50)
		eventually(t, 30*time.Second, "B to publish the rest", func() bool { return e.pending(t) == 0 })
		checkStreams(t, e, keys, n)
		if got := seqs(e.stream(t, "note")); !slices.Equal(got, upTo(n)) {
			t.Errorf("note stream: %v, want 1..%d in order, once each", got, n)
		}
		again := b.ids("outbox: publishing")
		for _, id := range unmarked {
			if !again[id] {
				t.Errorf("%s was published by A but not marked, and B did not publish it again", id)
			}
		}
	})
}

// TestProcessTwoRelaysNeverReorder: two relays run at once while records
// are added; the active one is SIGKILLed mid-stream and a third starts;
// every key's stream still holds its records once each, in order, and
// more than one relay published.
func TestProcessTwoRelaysNeverReorder(t *testing.T) {
	dialects(t, func(t *testing.T, e *env) {
		keys := []string{"c-1", "c-2", "c-3", "c-4"}
		const n = 40
		a := startRelayProc(t, e, "A", time.Second, 2*time.Millisecond, 20)
		b := startRelayProc(t, e, "B", time.Second, 2*time.Millisecond, 20)
		var wg sync.WaitGroup
		wg.Go(func() { addOrders(t, e, keys, n) })
		procs := []*relayProc{a, b}
		eventually(t, 20*time.Second, "40 records published", func() bool { return a.count("published")+b.count("published") >= 40 })
		// Kill the relay that took the lease last (a slow renewal on a
		// loaded machine may have handed it over already: that is fine).
		holder := a
		if lastAcquired(b).After(lastAcquired(a)) {
			holder = b
		}
		holder.kill()
		c := startRelayProc(t, e, "C", time.Second, 2*time.Millisecond, 20)
		procs = append(procs, c)
		wg.Wait()
		eventually(t, 30*time.Second, "every record published", func() bool { return e.pending(t) == 0 })
		checkStreams(t, e, keys, n)
		publishers := 0
		for _, p := range procs {
			if p.count("outbox: publishing") > 0 {
				publishers++
			}
		}
		if publishers < 2 {
			t.Errorf("%d relays published; the takeover did not happen", publishers)
		}
		// Every publish ran under a lease generation held by its relay
		// alone.
		owners := map[float64]string{}
		for _, p := range procs {
			for _, l := range p.logged("outbox: publishing") {
				g, _ := l["generation"].(float64)
				if o, ok := owners[g]; ok && o != p.owner {
					t.Fatalf("generation %v published by %s and %s", g, o, p.owner)
				}
				owners[g] = p.owner
			}
		}
	})
}

// lastAcquired is when p last took the lease (zero when never).
func lastAcquired(p *relayProc) time.Time {
	ls := p.logged("outbox: relay lease acquired; publishing")
	if len(ls) == 0 {
		return time.Time{}
	}
	at, _ := time.Parse(time.RFC3339Nano, fmt.Sprint(ls[len(ls)-1]["time"]))
	return at
}

// TestProcessStalledRelayPublishesNothingAfterResume: relay A's lease
// renewals are blocked (SIGUSR1, so that only its local deadline can stop
// it), then A is stopped (SIGSTOP) in the middle of a batch, past its
// lease; B takes over and publishes everything; A resumes (SIGCONT),
// finds its lease over, and starts no publish after the stop (every
// publish A logs was checked against its lease before it was stopped)
// and sends nothing to Redis after it resumes (no successful publish of
// A's started its Redis call after SIGCONT: the one in flight is cut by
// its context, which ended at the lease deadline). Per-key order holds.
func TestProcessStalledRelayPublishesNothingAfterResume(t *testing.T) {
	dialects(t, func(t *testing.T, e *env) {
		keys := []string{"c-1", "c-2"}
		const n = 60
		addOrders(t, e, keys, n)
		a := startRelayProc(t, e, "A", time.Second, 20*time.Millisecond, 100, "OUTBOX_GATE=1")
		eventually(t, 20*time.Second, "A to publish 5 records", func() bool { return a.count("published") >= 5 })
		a.signal(syscall.SIGUSR1)
		eventually(t, 10*time.Second, "A's renewals blocked", func() bool { return a.count("renewals blocked") > 0 })
		a.signal(syscall.SIGSTOP)
		// Every lease check A logs from now on must come after SIGCONT.
		eventually(t, 10*time.Second, "A to be stopped", a.stopped)
		stoppedAt := time.Now()
		b := startRelayProc(t, e, "B", time.Second, 0, 100)
		eventually(t, 30*time.Second, "B to take over and publish everything", func() bool {
			return b.count("outbox: relay lease acquired; publishing") > 0 && e.pending(t) == 0
		})
		resumedAt := time.Now()
		a.signal(syscall.SIGCONT)
		eventually(t, 20*time.Second, "A to see its lease lost", func() bool {
			return a.count("outbox: relay lease lost; publishing stopped until it is taken again") > 0
		})
		late := 0
		for _, l := range a.logged("outbox: publishing") {
			checked, err := time.Parse(time.RFC3339Nano, fmt.Sprint(l["lease_checked_at"]))
			if err != nil {
				t.Fatalf("publishing line %v: %v", l, err)
			}
			if !checked.Before(stoppedAt) {
				late++
			}
		}
		if late > 0 {
			t.Errorf("A started %d publishes after it was stopped past its lease", late)
		}
		for _, l := range a.logged("published") {
			started, err := time.Parse(time.RFC3339Nano, fmt.Sprint(l["started"]))
			if err != nil {
				t.Fatalf("published line %v: %v", l, err)
			}
			if !started.Before(resumedAt) {
				t.Errorf("A sent %v to Redis after it resumed, past its lease, and it succeeded", l["message_id"])
			}
		}
		t.Logf("A started %d publishes before the stop; B %d", a.count("outbox: publishing"), b.count("outbox: publishing"))
		checkStreams(t, e, keys, n)
		if e.count(t, `SELECT count(*) FROM seqby_outbox WHERE status = 'PUBLISHED'`) != len(keys)*n {
			t.Error("not every record is PUBLISHED")
		}
	})
}
