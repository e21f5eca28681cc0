// Package redistest starts a private redis-server on a free loopback port
// for tests and test harnesses, so no test ever touches a shared server
// (and never the default port 6379).
package redistest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ErrNoRedis means redis-server is not on PATH.
var ErrNoRedis = errors.New("redis-server not found on PATH; install it (apt-get install redis-server, or run .ci/ensure-redis)")

// Server is a running redis-server owned by the caller.
type Server struct {
	// Addr is host:port of the server (127.0.0.1:N).
	Addr string
	cmd  *exec.Cmd
	dir  string
	done chan struct{}
}

// Start launches redis-server on a free loopback port with persistence
// off, and returns once it answers PING. Stop it with Close. It needs no
// *testing.T so a multi-process harness can use it too.
func Start(ctx context.Context) (*Server, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, ErrNoRedis
	}
	var last error
	// A free port can be taken between probing and binding; try a few.
	for range 5 {
		s, err := start(ctx, bin)
		if err == nil {
			return s, nil
		}
		last = err
		if ctx.Err() != nil {
			break
		}
	}
	return nil, fmt.Errorf("redistest: start redis-server: %w", last)
}

func start(ctx context.Context, bin string) (*Server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "redistest-")
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin,
		"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", dir,
		"--protected-mode", "no", "--loglevel", "warning")
	// The server must not outlive a test process that is killed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	s := &Server{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), cmd: cmd, dir: dir, done: make(chan struct{})}
	go func() { cmd.Wait(); close(s.done) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if ping(s.Addr) == nil {
			return s, nil
		}
		select {
		case <-s.done:
			os.RemoveAll(dir)
			return nil, fmt.Errorf("redis-server exited: %s", strings.TrimSpace(out.String()))
		case <-ctx.Done():
			s.Close()
			return nil, ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.Close()
			return nil, fmt.Errorf("redis-server on %s did not answer PING within 10s", s.Addr)
		}
	}
}

// Close kills the server and removes its directory.
func (s *Server) Close() error {
	if s.cmd.Process != nil {
		s.cmd.Process.Kill()
	}
	<-s.done
	return os.RemoveAll(s.dir)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// ping speaks RESP directly so the helper needs no client library.
func ping(addr string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if !strings.HasPrefix(line, "+PONG") {
		return fmt.Errorf("unexpected PING reply %q", line)
	}
	return nil
}
