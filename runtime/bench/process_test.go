package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seqby/seqby/runtime"
)

// Engine processes: the throughput run's engines are separate OS
// processes, as in production, so they do not share a Go runtime (its
// scheduler and collector) with each other or with the benchmark. The
// test binary runs itself with SEQBY_BENCH_ENGINE set to
// "<redis addr> <owner id>"; such a process runs one engine with the
// counter's registration and prints "<applied> <first ns> <last ns>"
// every few milliseconds, until its stdin closes, when it stops
// gracefully. With SEQBY_BENCH_PROFILE set to a directory, each process
// writes its CPU profile there as <owner id>.cpu.prof.

func TestMain(m *testing.M) {
	if spec := os.Getenv("SEQBY_BENCH_ENGINE"); spec != "" {
		os.Exit(engineProcess(spec))
	}
	os.Exit(m.Run())
}

func engineProcess(spec string) int {
	addr, owner, ok := strings.Cut(spec, " ")
	if !ok {
		fmt.Fprintln(os.Stderr, "SEQBY_BENCH_ENGINE: want \"<addr> <owner>\"")
		return 2
	}
	c := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	defer c.Close()
	h := &counter{}
	opts := fastDiscovery
	opts.OwnerID, opts.Logger = owner, slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	eng, err := runtime.NewEngine(c, opts)
	if err == nil {
		err = eng.Register(h.registration())
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if dir := os.Getenv("SEQBY_BENCH_PROFILE"); dir != "" {
		f, err := os.Create(filepath.Join(dir, owner+".cpu.prof"))
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer f.Close()
		defer pprof.StopCPUProfile()
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { io.Copy(io.Discard, os.Stdin); cancel() }()
	done := make(chan error, 1)
	go func() { done <- eng.Run(ctx) }()
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	out := bufio.NewWriter(os.Stdout)
	for {
		select {
		case err := <-done:
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
			return 0
		case <-t.C:
			fmt.Fprintf(out, "%d %d %d\n", h.n.Load(), h.first.Load(), h.last.Load())
			out.Flush()
		}
	}
}

// engineProcs is the parent's view of running engine processes.
type engineProcs struct {
	cmds  []*exec.Cmd
	stdin []io.Closer
	mu    sync.Mutex
	last  [][3]int64 // per process: applied, first, last
	wg    sync.WaitGroup
}

// startEngineProcs starts n engine processes on the server at addr.
func startEngineProcs(b *testing.B, addr string, n int) *engineProcs {
	ep := &engineProcs{last: make([][3]int64, n)}
	for i := range n {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), fmt.Sprintf("SEQBY_BENCH_ENGINE=%s bench-%d", addr, i))
		cmd.Stderr = os.Stderr
		in, err := cmd.StdinPipe()
		if err != nil {
			b.Fatal(err)
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			b.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		ep.cmds, ep.stdin = append(ep.cmds, cmd), append(ep.stdin, in)
		ep.wg.Add(1)
		go func() {
			defer ep.wg.Done()
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				var v [3]int64
				for j, f := range strings.Fields(sc.Text()) {
					if j < 3 {
						v[j], _ = strconv.ParseInt(f, 10, 64)
					}
				}
				ep.mu.Lock()
				ep.last[i] = v
				ep.mu.Unlock()
			}
		}()
	}
	return ep
}

// applied is the events applied by every process, and the rate from the
// first applied (by any) to the last.
func (ep *engineProcs) applied() (n int64, rate float64) {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	var first, last int64
	for _, v := range ep.last {
		n += v[0]
		if v[1] != 0 && (first == 0 || v[1] < first) {
			first = v[1]
		}
		last = max(last, v[2])
	}
	if last <= first {
		return n, 0
	}
	return n, float64(n) / time.Duration(last-first).Seconds()
}

// stop ends the processes gracefully, waits for them, and returns the
// CPU time they used in all (user and system), start and stop included.
func (ep *engineProcs) stop(b *testing.B) time.Duration {
	for _, in := range ep.stdin {
		in.Close()
	}
	var cpu time.Duration
	for _, cmd := range ep.cmds {
		if err := cmd.Wait(); err != nil {
			b.Errorf("engine process: %v", err)
		}
		cpu += cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	}
	ep.wg.Wait()
	return cpu
}
