package guarantee

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seqby/seqby/runtime"
	"github.com/seqby/seqby/runtime/internal/rdb"
)

// The test binary doubles as an engine instance: with envChild set it runs
// one engine (the Recorder, keyed by client_id) until SIGTERM instead of the
// tests. Each instance is then a real OS process the tests can SIGKILL,
// SIGSTOP and SIGCONT.
const (
	envChild    = "SEQBY_GUARANTEE_CHILD"
	envRedis    = "SEQBY_GUARANTEE_REDIS"
	envInstance = "SEQBY_GUARANTEE_INSTANCE"
	envLeaseTTL = "SEQBY_GUARANTEE_LEASE_TTL"
	// envReapAfter, when set, is the instances' Options.ReapAfter.
	envReapAfter = "SEQBY_GUARANTEE_REAP_AFTER"
	// envMaxDeliveries, when set, is the instances' Options.MaxDeliveries.
	envMaxDeliveries = "SEQBY_GUARANTEE_MAX_DELIVERIES"
	// envHaltedRetry, when set, is the instances' Options.Retry.HaltedRetryInterval.
	envHaltedRetry = "SEQBY_GUARANTEE_HALTED_RETRY"
	// envAckBatch, when set, is the registration's AckBatch.
	envAckBatch = "SEQBY_GUARANTEE_ACK_BATCH"
	// envVerifyBound, when set, is the instances' Options.VerifyBound.
	envVerifyBound = "SEQBY_GUARANTEE_VERIFY_BOUND"
	// envReplicaAcks, when set, is the instances' Options.ReplicaAcks.
	envReplicaAcks = "SEQBY_GUARANTEE_REPLICA_ACKS"
	// envWitness, when set, is the address of the Redis the Recorder
	// also records to (Recorder.Witness).
	envWitness = "SEQBY_GUARANTEE_WITNESS"
	// envSource, when set, is the address an instance dials Redis from
	// (redistest.SourceDialer), so a test's partition can cut it off.
	envSource = "SEQBY_GUARANTEE_SOURCE"
)

// group is the Recorder's consumer group (its registration name).
var group = (&Recorder{}).SeqbyRegistration().Name

func TestMain(m *testing.M) {
	if os.Getenv(envChild) == "1" {
		os.Exit(childMain())
	}
	os.Exit(m.Run())
}

// childMain runs one engine instance with the Recorder and returns its
// exit code: 0 after a graceful stop on SIGTERM. Halts go to a Redis list
// the tests read; status snapshots carry the owned lease tokens.
func childMain() int {
	return runChild("child",
		func(c redis.UniversalClient, inst string) runtime.Registration {
			r := &Recorder{Redis: c, Instance: inst}
			if addr := os.Getenv(envWitness); addr != "" {
				r.Witness = redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
			}
			return r.SeqbyRegistration()
		},
		func(c redis.UniversalClient, inst string) func(runtime.Halt) {
			return func(h runtime.Halt) {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				c.RPush(ctx, haltsKey(), strings.Join([]string{inst, h.Key, h.EntryID, strconv.FormatInt(h.Generation, 10)}, "|"))
			}
		},
		func(p runtime.PartitionStatus) string { return p.Token })
}

// runChild is the body of every engine child process: it reads its
// instance id, Redis address and lease TTL from the environment, runs one
// engine with the registration reg builds until SIGTERM, and publishes
// numbered snapshots of what it owns ("n|item,item", each item from
// describe) so a test can wait for a snapshot taken after an event (a
// resume) instead of sleeping. onHalt may be nil.
func runChild(role string, reg func(c redis.UniversalClient, inst string) runtime.Registration,
	onHalt func(c redis.UniversalClient, inst string) func(runtime.Halt), describe func(runtime.PartitionStatus) string) int {
	inst, addr := os.Getenv(envInstance), os.Getenv(envRedis)
	ttl, err := time.ParseDuration(os.Getenv(envLeaseTTL))
	if inst == "" || addr == "" || err != nil {
		fmt.Fprintf(os.Stderr, "%s: bad environment (instance %q, redis %q, lease ttl: %v)\n", role, inst, addr, err)
		return 2
	}
	// Never outlive the test process, even if Pdeathsig misses (it follows
	// the spawning thread, not the process).
	ppid := os.Getppid()
	go func() {
		for range time.Tick(200 * time.Millisecond) {
			if os.Getppid() != ppid {
				os.Exit(3)
			}
		}
	}()
	c := newClientFrom(addr, os.Getenv(envSource))
	defer c.Close()
	opts := runtime.Options{
		OwnerID:           inst,
		LeaseTTL:          ttl,
		HeartbeatInterval: min(200*time.Millisecond, ttl/5),
		DiscoveryInterval: 200 * time.Millisecond,
		Retry:             runtime.RetryPolicy{MaxRetries: 2, RetryBackoff: 20 * time.Millisecond, MaxBackoff: 100 * time.Millisecond},
		BlockTimeout:      500 * time.Millisecond,
		Logger:            slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})),
	}
	if v := os.Getenv(envReapAfter); v != "" {
		if opts.ReapAfter, err = time.ParseDuration(v); err != nil {
			fmt.Fprintf(os.Stderr, "%s: bad %s: %v\n", role, envReapAfter, err)
			return 2
		}
	}
	if v := os.Getenv(envMaxDeliveries); v != "" {
		if opts.MaxDeliveries, err = strconv.Atoi(v); err != nil {
			fmt.Fprintf(os.Stderr, "%s: bad %s: %v\n", role, envMaxDeliveries, err)
			return 2
		}
	}
	if v := os.Getenv(envHaltedRetry); v != "" {
		if opts.Retry.HaltedRetryInterval, err = time.ParseDuration(v); err != nil {
			fmt.Fprintf(os.Stderr, "%s: bad %s: %v\n", role, envHaltedRetry, err)
			return 2
		}
	}
	if v := os.Getenv(envVerifyBound); v != "" {
		if opts.VerifyBound, err = time.ParseDuration(v); err != nil {
			fmt.Fprintf(os.Stderr, "%s: bad %s: %v\n", role, envVerifyBound, err)
			return 2
		}
	}
	if v := os.Getenv(envReplicaAcks); v != "" {
		if opts.ReplicaAcks, err = strconv.Atoi(v); err != nil {
			fmt.Fprintf(os.Stderr, "%s: bad %s: %v\n", role, envReplicaAcks, err)
			return 2
		}
		opts.ReplicaTimeout = 200 * time.Millisecond
	}
	r := reg(c, inst)
	if v := os.Getenv(envAckBatch); v != "" {
		if r.AckBatch, err = strconv.Atoi(v); err != nil {
			fmt.Fprintf(os.Stderr, "%s: bad %s: %v\n", role, envAckBatch, err)
			return 2
		}
	}
	if onHalt != nil {
		opts.OnHalt = onHalt(c, inst)
	}
	e, err := runtime.NewEngine(c, opts)
	if err == nil {
		err = e.Register(r)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, role+":", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	statusCtx, stopStatus := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for n := 1; ; n++ {
			var owned, paused []string
			st := e.Status()
			for _, h := range st.PausedHandlers {
				paused = append(paused, "handler:"+h)
			}
			for _, p := range st.Partitions {
				owned = append(owned, describe(p))
				if p.Paused {
					paused = append(paused, describe(p))
				}
			}
			c.Set(statusCtx, statusKey(inst), strconv.Itoa(n)+"|"+strings.Join(owned, ","), 0)
			c.Set(statusCtx, pausedStatusKey(inst), strconv.Itoa(n)+"|"+strings.Join(paused, ","), 0)
			select {
			case <-statusCtx.Done():
				return
			case <-t.C:
			}
		}
	}()
	err = e.Run(ctx)
	stopStatus()
	wg.Wait()
	if err != nil {
		fmt.Fprintln(os.Stderr, role+":", err)
		return 1
	}
	return 0
}

// cluster is a private redis-server and the engine instances a test runs
// against it.
type cluster struct {
	t        *testing.T
	ctx      context.Context
	rdb      redis.UniversalClient
	addr     string
	leaseTTL time.Duration
	// reapAfter, when set, is the Options.ReapAfter of instances started
	// after it is.
	reapAfter time.Duration
	// maxDeliveries, when set, is the Options.MaxDeliveries of instances
	// started after it is.
	maxDeliveries int
	// haltedRetry, when set, is the Options.Retry.HaltedRetryInterval of
	// instances started after it is.
	haltedRetry time.Duration
	// ackBatch and verifyBound, when set, are the registration's AckBatch
	// and the Options.VerifyBound of instances started after they are.
	ackBatch    int
	verifyBound time.Duration
	// replicaAcks, when set, is the Options.ReplicaAcks of instances
	// started after it is; witness, when set, the address of the Redis
	// their Recorders also record to.
	replicaAcks int
	witness     string
	// sources, per instance id, is the address it dials Redis from
	// (envSource).
	sources map[string]string
	// binaries, per instance id, is the test binary it runs when not
	// this one (an earlier build's: earlierBuild).
	binaries map[string]string
	pub      *runtime.Publisher
	logDir   string // the instances' logs

	mu    sync.Mutex
	procs map[string]*child
}

// child is one engine process.
type child struct {
	id   string
	cmd  *exec.Cmd
	log  string        // its stderr
	done chan struct{} // closed when it exited
	err  error         // Wait's result, set before done closes
}

// newCluster starts a redis-server for the test. Instances started with
// start use leaseTTL.
func newCluster(t *testing.T, leaseTTL time.Duration) *cluster {
	t.Helper()
	return newClusterAt(t, leaseTTL, startRedis(t))
}

// newClusterAt is newCluster on a Redis the test started (addr as
// startRedis returns it).
func newClusterAt(t *testing.T, leaseTTL time.Duration, addr string) *cluster {
	t.Helper()
	// Made before the cleanup below is registered, so the logs outlive it.
	logDir := t.TempDir()
	rdb := newClient(addr)
	t.Cleanup(func() { rdb.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	c := &cluster{t: t, ctx: ctx, rdb: rdb, addr: addr, leaseTTL: leaseTTL,
		pub: runtime.NewPublisher(rdb, runtime.PublisherOptions{}), logDir: logDir, procs: map[string]*child{}}
	// Registered after the server's cleanup, so it runs before it: every
	// child dies before its Redis does.
	t.Cleanup(c.cleanup)
	return c
}

// start launches instance id and waits until it has announced itself as a
// live member of the Recorder's group.
func (c *cluster) start(id string) *child {
	c.t.Helper()
	return c.launch(id, envChild, group)
}

// launch runs the test binary as child process id, in the role the env
// variable childEnv selects, and waits until it is a live member of the
// handler's group (the engine announces itself before it claims anything).
func (c *cluster) launch(id, childEnv, handler string) *child {
	c.t.Helper()
	ch := c.spawn(id, childEnv)
	c.eventually(30*time.Second, "instance "+id+" live", func() bool {
		select {
		case <-ch.done:
			c.t.Fatalf("instance %s exited at start: %v\n%s", id, ch.err, tail(ch.log, 40))
		default:
		}
		_, err := c.rdb.ZScore(c.ctx, rdb.MembersKey(handler), id).Result()
		return err == nil
	})
	return ch
}

// spawn runs the test binary (or the instance's binaries entry) as child
// process id, in the role the env variable childEnv selects.
func (c *cluster) spawn(id, childEnv string) *child {
	c.t.Helper()
	logPath := filepath.Join(c.logDir, id+".log")
	logf, err := os.Create(logPath)
	if err != nil {
		c.t.Fatal(err)
	}
	defer logf.Close()
	bin := os.Args[0]
	if b := c.binaries[id]; b != "" {
		bin = b
	}
	cmd := exec.Command(bin, "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=1", envRedis+"="+c.addr, envInstance+"="+id, envLeaseTTL+"="+c.leaseTTL.String())
	if c.reapAfter != 0 {
		cmd.Env = append(cmd.Env, envReapAfter+"="+c.reapAfter.String())
	}
	if c.maxDeliveries != 0 {
		cmd.Env = append(cmd.Env, envMaxDeliveries+"="+strconv.Itoa(c.maxDeliveries))
	}
	if c.haltedRetry != 0 {
		cmd.Env = append(cmd.Env, envHaltedRetry+"="+c.haltedRetry.String())
	}
	if c.ackBatch != 0 {
		cmd.Env = append(cmd.Env, envAckBatch+"="+strconv.Itoa(c.ackBatch))
	}
	if c.verifyBound != 0 {
		cmd.Env = append(cmd.Env, envVerifyBound+"="+c.verifyBound.String())
	}
	if c.replicaAcks != 0 {
		cmd.Env = append(cmd.Env, envReplicaAcks+"="+strconv.Itoa(c.replicaAcks))
	}
	if c.witness != "" {
		cmd.Env = append(cmd.Env, envWitness+"="+c.witness)
	}
	if src := c.sources[id]; src != "" {
		cmd.Env = append(cmd.Env, envSource+"="+src)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	// Its own process group (a terminal's ^C is for the test, which then
	// kills its children), and killed if the test process dies.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		c.t.Fatalf("start instance %s: %v", id, err)
	}
	ch := &child{id: id, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() { ch.err = cmd.Wait(); close(ch.done) }()
	c.mu.Lock()
	c.procs[id] = ch
	c.mu.Unlock()
	return ch
}

// cleanup kills every instance still running (SIGCONT first, so a stopped
// one can die) and shows their logs when the test failed.
func (c *cluster) cleanup() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, ch := range c.procs {
		select {
		case <-ch.done:
		default:
			syscall.Kill(ch.cmd.Process.Pid, syscall.SIGCONT)
			syscall.Kill(-ch.cmd.Process.Pid, syscall.SIGKILL)
			<-ch.done
		}
		if c.t.Failed() {
			c.t.Logf("--- log of instance %s (last lines) ---\n%s", ch.id, tail(ch.log, 60))
		}
	}
}

func (c *cluster) proc(id string) *child {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch, ok := c.procs[id]
	if !ok {
		c.t.Fatalf("no instance %s", id)
	}
	return ch
}

func (c *cluster) signal(id string, sig syscall.Signal) {
	c.t.Helper()
	if err := c.proc(id).cmd.Process.Signal(sig); err != nil {
		c.t.Fatalf("signal %v to %s: %v", sig, id, err)
	}
}

// kill SIGKILLs id and waits until it is gone.
func (c *cluster) kill(id string) {
	c.t.Helper()
	c.signal(id, syscall.SIGKILL)
	<-c.proc(id).done
}

// waitExit waits for id to exit and returns its Wait error.
func (c *cluster) waitExit(id string, within time.Duration) error {
	c.t.Helper()
	ch := c.proc(id)
	select {
	case <-ch.done:
		return ch.err
	case <-time.After(within):
		c.t.Fatalf("instance %s did not exit within %v", id, within)
		return nil
	}
}

// eventually polls cond until it holds: tests wait on state, never on
// sleeps.
func (c *cluster) eventually(within time.Duration, what string, cond func() bool) {
	c.t.Helper()
	c.eventuallyDescribed(within, func() string { return what }, cond)
}

// eventuallyDescribed is eventually with a description computed at the
// time-out, so it can show the state that was waited on.
func (c *cluster) eventuallyDescribed(within time.Duration, what func() string, cond func() bool) {
	c.t.Helper()
	if !c.poll(within, cond) {
		c.t.Fatalf("timed out after %v waiting for %s", within, what())
	}
}

// poll polls cond until it holds or within passes, and reports which.
func (c *cluster) poll(within time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}

// publish publishes steps in order.
func (c *cluster) publish(steps ...Step) {
	c.t.Helper()
	for _, s := range steps {
		if err := c.pub.Publish(c.ctx, s); err != nil {
			c.t.Fatalf("publish %+v: %v", s, err)
		}
	}
}

// owner returns the instance holding key's lease and the lease generation
// ("" when no one holds it).
func (c *cluster) owner(key string) (string, int64) {
	tok, err := c.rdb.Get(c.ctx, rdb.LeaseKey(rdb.PartitionStream(Category, key), group)).Result()
	if err != nil {
		return "", 0
	}
	o, g, err := rdb.ParseToken(tok)
	if err != nil {
		c.t.Fatalf("lease of %s holds %q: %v", key, tok, err)
	}
	return o, g
}

// laneGroup is the Recorder's consumer group on stream, whichever it is
// (its lease generation's, a parked one, the shared one), or the shared
// group's name when the stream has none of it (the reads that follow
// then report NOGROUP).
func (c *cluster) laneGroup(stream string) string {
	g, err := rdb.LaneGroup(c.ctx, c.rdb, stream, group)
	if err != nil || g == "" {
		return group
	}
	return g
}

// waitOwnsSome waits until instance id holds the lease of one of keys.
func (c *cluster) waitOwnsSome(id string, keys []string) {
	c.t.Helper()
	c.eventually(30*time.Second, id+" to own a partition", func() bool {
		for _, k := range keys {
			if o, _ := c.owner(k); o == id {
				return true
			}
		}
		return false
	})
}

// state is key's optimistic-concurrency state: the last seq applied in
// order.
func (c *cluster) state(key string) int {
	n, _ := c.rdb.Get(c.ctx, stateKey(key)).Int()
	return n
}

// status returns the latest numbered snapshot of id's owned lease tokens.
func (c *cluster) status(id string) (int, []string) { return c.snapshot(statusKey(id)) }

// pausedStatus returns the latest numbered snapshot of the lease tokens
// of id's partitions that it found paused, with "handler:NAME" for each
// handler it found paused whole.
func (c *cluster) pausedStatus(id string) (int, []string) { return c.snapshot(pausedStatusKey(id)) }

// snapshot reads a numbered snapshot, "n|item,item".
func (c *cluster) snapshot(key string) (int, []string) {
	v, err := c.rdb.Get(c.ctx, key).Result()
	if err != nil {
		return 0, nil
	}
	num, toks, _ := strings.Cut(v, "|")
	n, _ := strconv.Atoi(num)
	if toks == "" {
		return n, nil
	}
	return n, strings.Split(toks, ",")
}

// mark is one entry or exit of the Recorder.
type mark struct {
	Phase    string // "enter" or "exit"
	Instance string
	Token    string
	Seq      int
	At       int64 // Redis time, µs
}

// marks returns key's entry log in order.
func (c *cluster) marks(key string) []mark {
	c.t.Helper()
	return c.parseMarks(c.rdb.LRange(c.ctx, entriesKey(key), 0, -1).Val())
}

// parseMarks reads "phase|inst|token|seq|at" records.
func (c *cluster) parseMarks(records []string) []mark {
	c.t.Helper()
	var out []mark
	for _, s := range records {
		f := strings.Split(s, "|")
		if len(f) != 5 {
			c.t.Fatalf("bad entry record %q", s)
		}
		seq, _ := strconv.Atoi(f[3])
		at, _ := strconv.ParseInt(f[4], 10, 64)
		out = append(out, mark{Phase: f[0], Instance: f[1], Token: f[2], Seq: seq, At: at})
	}
	return out
}

// commit is one record of the applied or rejected log.
type commit struct {
	Seq      int
	Instance string
	Token    string
}

func (c *cluster) commits(listKey string) []commit {
	c.t.Helper()
	var out []commit
	for _, s := range c.rdb.LRange(c.ctx, listKey, 0, -1).Val() {
		f := strings.Split(s, "|")
		if len(f) != 3 {
			c.t.Fatalf("bad commit record %q", s)
		}
		seq, _ := strconv.Atoi(f[0])
		out = append(out, commit{Seq: seq, Instance: f[1], Token: f[2]})
	}
	return out
}

// applied returns key's applied log.
func (c *cluster) applied(key string) []commit { return c.commits(appliedKey(key)) }

// appliedSeqs returns the seqs of key's applied log in commit order.
func (c *cluster) appliedSeqs(key string) []int {
	var out []int
	for _, a := range c.applied(key) {
		out = append(out, a.Seq)
	}
	return out
}

// overlaps returns the overlaps the marker recorded for key.
func (c *cluster) overlaps(key string) []string {
	return c.rdb.LRange(c.ctx, overlapsKey(key), 0, -1).Val()
}

// waitApplied waits until each key's state reaches n, or its applied log
// holds every seq 1..n in whatever order (so that an order violation is
// reported by checkOrder, not as a time-out). It fails the test at once on
// a time-out.
func (c *cluster) waitApplied(within time.Duration, n int, keys ...string) {
	c.t.Helper()
	if !c.tryWaitApplied(within, n, keys...) {
		c.t.FailNow()
	}
}

// tryWaitApplied is waitApplied that reports a time-out with Errorf and
// returns false, so a test can still check what was recorded.
func (c *cluster) tryWaitApplied(within time.Duration, n int, keys ...string) bool {
	c.t.Helper()
	ok := true
	for _, k := range keys {
		if !c.poll(within, func() bool { return c.appliedAll(k, n) }) {
			c.t.Errorf("timed out after %v waiting for %s applied through %d (applied log: %v)", within, k, n, c.appliedSeqs(k))
			ok = false
		}
	}
	return ok
}

// appliedAll reports whether key's state reached n or its applied log holds
// every seq 1..n.
func (c *cluster) appliedAll(key string, n int) bool {
	if c.state(key) >= n {
		return true
	}
	seen := map[int]bool{}
	for _, s := range c.appliedSeqs(key) {
		if s >= 1 && s <= n {
			seen[s] = true
		}
	}
	return len(seen) == n
}

// checkOrder fails the test unless key's applied log, with re-runs of the
// event just applied collapsed (at-least-once across a handover), is exactly
// 1..n, and the optimistic state reached n. It returns the number of
// re-runs.
func (c *cluster) checkOrder(key string, n int) int {
	c.t.Helper()
	seqs := c.appliedSeqs(key)
	collapsed, reruns := collapseReruns(seqs)
	want := make([]int, n)
	for i := range want {
		want[i] = i + 1
	}
	if !slices.Equal(collapsed, want) {
		c.t.Errorf("%s applied %v, want 1..%d in publish order (only an immediate re-run allowed)", key, seqs, n)
	}
	if s := c.state(key); s != n {
		c.t.Errorf("%s optimistic state is %d, want %d", key, s, n)
	}
	return reruns
}

// collapseReruns drops an applied seq equal to the one before it.
func collapseReruns(seqs []int) ([]int, int) {
	var out []int
	reruns := 0
	for _, s := range seqs {
		if len(out) > 0 && out[len(out)-1] == s {
			reruns++
			continue
		}
		out = append(out, s)
	}
	return out, reruns
}

// window is one handler run: from entry to exit, Redis time.
type window struct {
	Instance, Token string
	Seq             int
	From, To        int64
}

// windows pairs key's entries with their exits (same instance, token and
// seq, in order). A run that never exited (its process was killed) lasts
// to the end of time.
func windows(ms []mark) []window {
	type run struct {
		inst, tok string
		seq       int
	}
	open := map[run][]int{} // run -> indexes into out still open
	var out []window
	for _, m := range ms {
		r := run{m.Instance, m.Token, m.Seq}
		switch m.Phase {
		case "enter":
			open[r] = append(open[r], len(out))
			out = append(out, window{Instance: m.Instance, Token: m.Token, Seq: m.Seq, From: m.At, To: openEnd})
		case "exit":
			if idx := open[r]; len(idx) > 0 {
				out[idx[0]].To = m.At
				open[r] = idx[1:]
			}
		}
	}
	return out
}

func (w window) overlaps(o window) bool { return w.From < o.To && o.From < w.To }

// openEnd is the end of a run that never exited.
const openEnd = 1<<63 - 1

// checkExclusive fails the test if the marker recorded an overlap for key,
// or if two runs of different events of key intersect in Redis time. Runs
// for which exempt returns true are left out of the time check: a killed
// process's unfinished run, or a stalled owner's in-flight body (the ADR's
// allowed residual). exempt may be nil.
func (c *cluster) checkExclusive(key string, exempt func(window) bool) {
	c.t.Helper()
	if ov := c.overlaps(key); len(ov) > 0 {
		c.t.Errorf("%s: the in-progress marker was held by two events at once: %v", key, ov)
	}
	c.checkWindows(key, exempt)
}

// checkWindows is checkExclusive's time check alone, for a test whose
// killed process left the in-progress marker held by an event it never
// finished (a later event of the key then finds it held).
func (c *cluster) checkWindows(key string, exempt func(window) bool) {
	c.t.Helper()
	ws := windows(c.marks(key))
	skip := func(w window) bool { return exempt != nil && exempt(w) }
	for i, a := range ws {
		for _, b := range ws[i+1:] {
			if a.Seq == b.Seq || !a.overlaps(b) || skip(a) || skip(b) {
				continue
			}
			c.t.Errorf("%s: event %d (%s) and event %d (%s) were in the handler at once", key, a.Seq, a.Token, b.Seq, b.Token)
		}
	}
}

// entered reports whether some run of key's seq entered under a token whose
// owner is inst (any instance when inst is "").
func entered(ms []mark, inst string, seq int) (mark, bool) {
	for _, m := range ms {
		if m.Phase == "enter" && m.Seq == seq && (inst == "" || m.Instance == inst) {
			return m, true
		}
	}
	return mark{}, false
}

// clientKeys is n keys, client-00 and on.
func clientKeys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("client-%02d", i)
	}
	return keys
}

// roundOf is event r of every key, each taking ms in the handler.
func roundOf(keys []string, r, ms int) []Step {
	out := make([]Step, 0, len(keys))
	for _, k := range keys {
		out = append(out, Step{ClientID: k, Seq: r, SlowMS: ms})
	}
	return out
}

// steps returns Step seq from..to of key.
func steps(key string, from, to int) []Step {
	var out []Step
	for i := from; i <= to; i++ {
		out = append(out, Step{ClientID: key, Seq: i})
	}
	return out
}

// interleave merges per-key step lists round-robin, so consecutive publishes
// alternate keys.
func interleave(lists ...[]Step) []Step {
	var out []Step
	for i := 0; ; i++ {
		added := false
		for _, l := range lists {
			if i < len(l) {
				out = append(out, l[i])
				added = true
			}
		}
		if !added {
			return out
		}
	}
}

// tail returns the last n lines of a file.
func tail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	var lines []string
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 64*1024), 1024*1024)
	for s.Scan() {
		lines = append(lines, s.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	return strings.Join(lines, "\n")
}
