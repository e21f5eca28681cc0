package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seqby/seqby/examples/orders/billing"
	"github.com/seqby/seqby/runtime"
)

// Engine A runs as a child process, so the demo can kill it for real: the
// demo's binary runs itself with engineEnv set to the engine's name,
// redisEnv to the Redis URL and embeddedEnv to "1" when that Redis is the
// embedded one; the child prints "ready" once consuming and runs until
// its stdin closes, or it is killed.
const (
	engineEnv   = "SEQBY_DEMO_ENGINE"
	redisEnv    = "SEQBY_DEMO_REDIS"
	embeddedEnv = "SEQBY_DEMO_EMBEDDED"
)

// childMain is the child process's main, reading its environment.
func childMain(name string, stdin io.Reader, stdout, stderr io.Writer) int {
	return runEngine(name, os.Getenv(redisEnv), os.Getenv(embeddedEnv) == "1", stdin, stdout, stderr)
}

// applyDelay is how long the ledger takes per event: long enough to kill
// an engine in the middle of its work, short enough for a quick story.
const applyDelay = 30 * time.Millisecond

// engineOptions are both engines' options: a 2s lease, so a killed
// engine's clients are taken over within about 2s.
func engineOptions(name string, logs io.Writer) runtime.Options {
	return runtime.Options{
		OwnerID:           fmt.Sprintf("engine-%s-%d-%d", name, os.Getpid(), time.Now().UnixNano()),
		LeaseTTL:          2 * time.Second,
		HeartbeatInterval: 400 * time.Millisecond,
		DiscoveryInterval: 100 * time.Millisecond,
		Logger:            slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn})).With("engine", name),
	}
}

// newEngine is engine name on c with the demo's handlers registered; its
// Ledger knows the items of catalogue.
func newEngine(c redis.UniversalClient, name string, catalogue *billing.Catalogue, logs io.Writer, opts ...func(*runtime.Options)) (*runtime.Engine, error) {
	o := engineOptions(name, logs)
	for _, f := range opts {
		f(&o)
	}
	eng, err := runtime.NewEngine(c, o)
	if err != nil {
		return nil, err
	}
	ledger := &billing.Ledger{Engine: name, Journal: billing.RedisJournal{C: c}, Delay: applyDelay, Catalogue: catalogue}
	return eng, eng.Register(ledger.SeqbyRegistration(), new(billing.Fulfilment).SeqbyRegistration())
}

// runEngine is the child process's engine, on the Redis at url (the
// embedded one: no eviction check, miniredis has no CONFIG).
func runEngine(name, url string, embedded bool, stdin io.Reader, stdout, stderr io.Writer) int {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c, err := runtime.Connect(ctx, url)
	if err != nil {
		fmt.Fprintf(stderr, "engine %s: %v\n", name, err)
		return 1
	}
	defer c.Close()
	eng, err := newEngine(c, name, new(billing.Catalogue), stderr, func(o *runtime.Options) { o.SkipEvictionCheck = embedded })
	if err != nil {
		fmt.Fprintf(stderr, "engine %s: %v\n", name, err)
		return 1
	}
	go func() { io.Copy(io.Discard, stdin); cancel() }()
	done := make(chan error, 1)
	go func() { done <- eng.Run(ctx) }()
	for !eng.Status().Consuming {
		select {
		case err := <-done:
			fmt.Fprintf(stderr, "engine %s: %v\n", name, err)
			return 1
		case <-time.After(10 * time.Millisecond):
		}
	}
	fmt.Fprintln(stdout, "ready")
	if err := <-done; err != nil {
		fmt.Fprintf(stderr, "engine %s: %v\n", name, err)
		return 1
	}
	return 0
}

// child is engine A, running as a child process.
type child struct {
	cmd   *exec.Cmd
	stdin io.Closer
	ready chan struct{}
}

// startChild starts engine name as a child process on url (embedded: the
// demo's miniredis) and waits until it consumes.
func startChild(ctx context.Context, name, url string, embedded bool, stderr io.Writer) (*child, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self, "-test.run=^$") // the flag is for a test binary running the demo; the demo ignores it
	emb := ""
	if embedded {
		emb = "1"
	}
	cmd.Env = append(os.Environ(), engineEnv+"="+name, redisEnv+"="+url, embeddedEnv+"="+emb)
	cmd.Stderr = stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	ch := &child{cmd: cmd, stdin: in, ready: make(chan struct{})}
	go func() {
		var line [6]byte
		if n, _ := io.ReadFull(out, line[:]); n == 6 && string(line[:5]) == "ready" {
			close(ch.ready)
		}
		io.Copy(io.Discard, out)
	}()
	select {
	case <-ch.ready:
		return ch, nil
	case <-ctx.Done():
		ch.kill()
		return nil, fmt.Errorf("engine %s did not start: %w", name, ctx.Err())
	}
}

// kill ends the child at once (SIGKILL): no graceful handover.
func (c *child) kill() {
	c.cmd.Process.Kill()
	c.cmd.Wait()
}
