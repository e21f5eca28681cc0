package seqbytest

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"sync"
	"testing"
)

// testLogger logs the engine's warnings and errors to the test's output
// (t.Output: shown with the failing test, and with -v), each line
// prefixed with pos, the test's file:line, as t.Log would print it. The
// engine logs from its own goroutines, where t.Log would name this file,
// not the test; t.Helper cannot help there. Lines logged after the test
// has ended (an engine that did not stop) go to standard error instead:
// the test's output no longer takes them.
func testLogger(t testing.TB, pos string) *slog.Logger {
	s := &sink{w: t.Output(), late: os.Stderr, pos: pos, test: t.Name()}
	t.Cleanup(s.close)
	return slog.New(&tHandler{s: s})
}

// sink is where a test's log lines go.
type sink struct {
	mu     sync.Mutex
	w      io.Writer // the test's output
	late   io.Writer // where lines go once the test has ended
	pos    string
	test   string
	closed bool
}

// write writes one line, prefixed with the test's position.
func (s *sink) write(line string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		fmt.Fprintf(s.late, "seqbytest: after %s ended: %s: %s\n", s.test, s.pos, line)
		return
	}
	io.WriteString(s.w, s.pos+": "+line+"\n")
}

// close sends later lines to the late writer. It runs in the test's
// cleanup after the engine's stop (cleanups run last registered first).
func (s *sink) close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
}

type tHandler struct {
	s     *sink
	attrs []slog.Attr
}

func (h *tHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }

func (h *tHandler) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Level.String() + " " + r.Message)
	add := func(a slog.Attr) bool { b.WriteString(" " + a.String()); return true }
	for _, a := range h.attrs {
		add(a)
	}
	r.Attrs(add)
	h.s.write(b.String())
	return nil
}

func (h *tHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &tHandler{s: h.s, attrs: append(append([]slog.Attr(nil), h.attrs...), as...)}
}

func (h *tHandler) WithGroup(string) slog.Handler { return h }

// kitPrefix starts the names of this package's functions (not those of
// its external test package, seqbytest_test).
const kitPrefix = "github.com/seqby/seqby/runtime/seqbytest."

// testPosition is the file:line in the test that called into the kit,
// the way t.Log names a test's line: the last frame before the testing
// package's (the Test function or t.Run closure, seen through any helper
// of the user's), or, on a stack that does not come from the testing
// package, the first frame outside the kit. Call it on the test's
// goroutine.
func testPosition() string {
	pcs := make([]uintptr, 64)
	n := goruntime.Callers(2, pcs)
	frames := goruntime.CallersFrames(pcs[:n])
	var first, last goruntime.Frame
	for {
		f, more := frames.Next()
		if stackBase(f.Function) && last.PC != 0 {
			return framePos(last)
		}
		if !strings.HasPrefix(f.Function, kitPrefix) {
			if first.PC == 0 {
				first = f
			}
			last = f
		}
		if !more {
			break
		}
	}
	if first.PC == 0 {
		return "???:1"
	}
	return framePos(first)
}

// stackBase reports a function of the testing package (tRunner, an
// example's runner, a synctest bubble) or Go's runtime (goexit): a frame
// below the user's code.
func stackBase(fn string) bool {
	for _, p := range []string{"testing.", "testing/", "runtime."} {
		if strings.HasPrefix(fn, p) {
			return true
		}
	}
	return false
}

// framePos is f's file base name and line, as the testing package prints
// them.
func framePos(f goruntime.Frame) string {
	return fmt.Sprintf("%s:%d", filepath.Base(f.File), f.Line)
}
