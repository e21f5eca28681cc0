package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
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
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seqby/seqby/runtime"
)

// Engine processes: the throughput and latency runs' consumers are
// separate OS processes, as in production, so they do not share a Go
// runtime (its scheduler and collector) with each other or with the
// benchmark, and their CPU time is theirs alone. The test binary runs
// itself with SEQBY_BENCH_ENGINE set to "<redis addr> <owner id>" (one
// engine with the counter's registration) or SEQBY_BENCH_PLAIN set to
// "<redis addr> <consumer name>" (one consumer of the plain group "g" on
// the stream "plain"). Such a process prints
//
//	<applied> <first ns> <last ns> <cpu ns> <hot applied> <hot first ns> <hot last ns>
//
// every few milliseconds, until its stdin closes, when it stops
// gracefully: cpu is its own user and system time so far, and the hot
// fields count the events of the key named by SEQBY_BENCH_HOTKEY (zero
// without it). With SEQBY_BENCH_DEFAULTS set, an engine runs with the
// default Options rather than fastDiscovery. With SEQBY_BENCH_LATENCY set to a directory, it records
// publish → handler start of every event with Seq >= 0 (lower ones warm
// up) and writes them there on exit as <owner id>.lat, little-endian
// int64 nanoseconds. With SEQBY_BENCH_PROFILE set to a directory, each
// process writes its CPU profile there as <owner id>.cpu.prof.

func TestMain(m *testing.M) {
	if spec := os.Getenv("SEQBY_BENCH_ENGINE"); spec != "" {
		os.Exit(childProcess(spec, false))
	}
	if spec := os.Getenv("SEQBY_BENCH_PLAIN"); spec != "" {
		os.Exit(childProcess(spec, true))
	}
	os.Exit(m.Run())
}

// childProcess is an engine process (plain: a plain group's consumer).
func childProcess(spec string, plain bool) int {
	addr, owner, ok := strings.Cut(spec, " ")
	if !ok {
		fmt.Fprintln(os.Stderr, "SEQBY_BENCH_ENGINE or SEQBY_BENCH_PLAIN: want \"<addr> <owner>\"")
		return 2
	}
	c := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	defer c.Close()
	h := &counter{hotKey: os.Getenv("SEQBY_BENCH_HOTKEY")}
	latDir := os.Getenv("SEQBY_BENCH_LATENCY")
	if latDir != "" {
		h.lat = newLatencies(0)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var run func() error
	if plain {
		run = func() error {
			plainConsumer(ctx, c, "plain", "g", owner, h.plainMessage)
			return nil
		}
	} else {
		opts := fastDiscovery
		if os.Getenv("SEQBY_BENCH_DEFAULTS") != "" {
			opts = runtime.Options{}
		}
		opts.OwnerID, opts.Logger = owner, slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
		reg := h.registration()
		reg.AckBatch, _ = strconv.Atoi(os.Getenv("SEQBY_BENCH_ACKBATCH"))
		opts.ReplicaAcks, _ = strconv.Atoi(os.Getenv("SEQBY_BENCH_REPLICA_ACKS"))
		eng, err := runtime.NewEngine(c, opts)
		if err == nil {
			err = eng.Register(reg)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		run = func() error { return eng.Run(ctx) }
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
	go func() { io.Copy(io.Discard, os.Stdin); cancel() }()
	done := make(chan error, 1)
	go func() { done <- run() }()
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	out := bufio.NewWriter(os.Stdout)
	for {
		select {
		case err := <-done:
			if err == nil && latDir != "" {
				err = h.lat.write(filepath.Join(latDir, owner+".lat"))
			}
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
			return 0
		case <-t.C:
			// Counts first: a line never shows more CPU than the events
			// it counts cost (the other way round it could show events
			// without their cost).
			all, hot := h.span(), h.hot.span()
			fmt.Fprintf(out, "%d %d %d %d %d %d %d\n", all.n, all.first, all.last, selfCPU(), hot.n, hot.first, hot.last)
			out.Flush()
		}
	}
}

// selfCPU is this process's CPU time so far (user and system), in
// nanoseconds.
func selfCPU() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// procSpec is what startProcs starts.
type procSpec struct {
	plain      bool   // plain group consumers instead of seqby engines
	hotKey     string // the key whose events the processes count apart
	latencyDir string // where the processes write their latencies
	defaults   bool   // engines with the default Options, not fastDiscovery
	ackBatch   int    // the registration's AckBatch (0: the default promise)
	// replicaAcks is the engines' Options.ReplicaAcks (0: the default
	// mode).
	replicaAcks int
}

// procStatus is one process's last status line.
type procStatus struct {
	all, hot span
	cpu      int64 // ns
}

// engineProcs is the parent's view of running engine (or plain consumer)
// processes.
type engineProcs struct {
	spec    procSpec
	cmds    []*exec.Cmd
	stdin   []io.Closer
	mu      sync.Mutex
	last    []procStatus
	wg      sync.WaitGroup
	stopped bool
	// logs are the processes' stderr, shown after the result by stop:
	// written to the benchmark's output, a warning would split a result
	// line.
	logs []*bytes.Buffer
}

// startEngineProcs starts n engine processes on the server at addr.
func startEngineProcs(b *testing.B, addr string, n int) *engineProcs {
	return startProcs(b, addr, n, procSpec{})
}

// startProcs starts n processes as spec says on the server at addr; if
// the benchmark ends before stop, they are killed.
func startProcs(b *testing.B, addr string, n int, spec procSpec) *engineProcs {
	ep := &engineProcs{spec: spec, last: make([]procStatus, n)}
	b.Cleanup(func() {
		if !ep.stopped {
			for _, cmd := range ep.cmds {
				cmd.Process.Kill()
				cmd.Wait()
			}
		}
	})
	env, name := "SEQBY_BENCH_ENGINE", "bench"
	if spec.plain {
		env, name = "SEQBY_BENCH_PLAIN", "plain"
	}
	for i := range n {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		defaults := ""
		if spec.defaults {
			defaults = "1"
		}
		// Set even when empty: the last of a duplicate key wins, so the
		// benchmark's own environment cannot leak into a process.
		cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s %s-%d", env, addr, name, i),
			"SEQBY_BENCH_HOTKEY="+spec.hotKey, "SEQBY_BENCH_LATENCY="+spec.latencyDir, "SEQBY_BENCH_DEFAULTS="+defaults,
			"SEQBY_BENCH_ACKBATCH="+strconv.Itoa(spec.ackBatch), "SEQBY_BENCH_REPLICA_ACKS="+strconv.Itoa(spec.replicaAcks))
		logs := new(bytes.Buffer)
		cmd.Stderr = logs
		ep.logs = append(ep.logs, logs)
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
				var v [7]int64
				for j, f := range strings.Fields(sc.Text()) {
					if j < len(v) {
						v[j], _ = strconv.ParseInt(f, 10, 64)
					}
				}
				ep.mu.Lock()
				ep.last[i] = procStatus{all: span{v[0], v[1], v[2]}, cpu: v[3], hot: span{v[4], v[5], v[6]}}
				ep.mu.Unlock()
			}
		}()
	}
	return ep
}

// status is the processes' last status lines together: the events
// applied by every process (from the first applied by any to the last),
// those of the hot key, and their CPU time so far.
func (ep *engineProcs) status() (all, hot span, cpu time.Duration) {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	for _, s := range ep.last {
		all, hot, cpu = all.merge(s.all), hot.merge(s.hot), cpu+time.Duration(s.cpu)
	}
	return all, hot, cpu
}

// applied is the events applied by every process, and the rate from the
// first applied (by any) to the last.
func (ep *engineProcs) applied() (n int64, rate float64) {
	all, _, _ := ep.status()
	return all.n, all.rate()
}

// stop ends the processes gracefully, waits for them, and returns the
// CPU time they used in all (user and system), start and stop included.
func (ep *engineProcs) stop(b *testing.B) time.Duration {
	ep.stopped = true
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
	for i, l := range ep.logs {
		if l.Len() > 0 {
			lines := strings.Split(strings.TrimSpace(l.String()), "\n")
			b.Logf("process %d logged %d lines; the first: %s", i, len(lines), strings.Join(lines[:min(len(lines), 5)], "\n"))
		}
	}
	return cpu
}

// latencies reads what the stopped processes recorded.
func (ep *engineProcs) latencies(b *testing.B) *latencies {
	l := newLatencies(0)
	for i := range ep.cmds {
		name := fmt.Sprintf("bench-%d.lat", i)
		if ep.spec.plain {
			name = fmt.Sprintf("plain-%d.lat", i)
		}
		p, err := os.ReadFile(filepath.Join(ep.spec.latencyDir, name))
		if err != nil {
			b.Fatal(err)
		}
		for ; len(p) >= 8; p = p[8:] {
			l.d = append(l.d, time.Duration(binary.LittleEndian.Uint64(p)))
		}
	}
	return l
}

// write saves the latencies as little-endian int64 nanoseconds.
func (l *latencies) write(path string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	p := make([]byte, 0, 8*len(l.d))
	for _, d := range l.d {
		p = binary.LittleEndian.AppendUint64(p, uint64(d))
	}
	return os.WriteFile(path, p, 0o644)
}
