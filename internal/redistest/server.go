// Package redistest starts a private redis-server on a free loopback port
// for tests and test harnesses, so no test ever touches a shared server
// (and never the default port 6379).
package redistest

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
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
	cfg  Config
	bin  string
	port int
	dir  string
	cmd  *exec.Cmd
	done chan struct{}
	out  *strings.Builder
}

// Config shapes a server. The zero value is a plain server with
// persistence off.
type Config struct {
	// Args are extra redis-server arguments.
	Args []string
	// TLS, when set, makes the server listen with TLS only (the plain port
	// is off); it is the client configuration the readiness check dials
	// with. Args must then carry --tls-cert-file and its friends.
	TLS *tls.Config
	// Persist turns the append-only file on with an fsync per write, so a
	// Restart after Kill comes back with every acknowledged write.
	Persist bool
	// sentinel runs the server as a Redis Sentinel (StartSentinel), from a
	// config file it may rewrite; Args and Persist do not apply.
	sentinel bool
}

// Start launches redis-server on a free loopback port with persistence
// off, and returns once it answers PING. Stop it with Close. It needs no
// *testing.T so a multi-process harness can use it too.
func Start(ctx context.Context) (*Server, error) { return StartConfig(ctx, Config{}) }

// StartConfig is Start with a Config.
func StartConfig(ctx context.Context, cfg Config) (*Server, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, ErrNoRedis
	}
	var last error
	// A free port can be taken between probing and binding; try a few.
	for range 5 {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		dir, err := os.MkdirTemp("", "redistest-")
		if err != nil {
			return nil, err
		}
		s := &Server{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), cfg: cfg, bin: bin, port: port, dir: dir}
		if err = s.launch(ctx); err == nil {
			return s, nil
		}
		os.RemoveAll(dir)
		last = err
		if ctx.Err() != nil {
			break
		}
	}
	return nil, fmt.Errorf("redistest: start redis-server: %w", last)
}

// launch runs the server on s.port in s.dir and waits for PING.
func (s *Server) launch(ctx context.Context) error {
	args := []string{"--bind", "127.0.0.1", "--dir", s.dir, "--save", "",
		"--protected-mode", "no", "--loglevel", "warning"}
	if s.cfg.TLS != nil {
		args = append(args, "--port", "0", "--tls-port", strconv.Itoa(s.port))
	} else {
		args = append(args, "--port", strconv.Itoa(s.port))
	}
	if s.cfg.Persist {
		args = append(args, "--appendonly", "yes", "--appendfsync", "always")
	} else {
		args = append(args, "--appendonly", "no")
	}
	args = append(args, s.cfg.Args...)
	if s.cfg.sentinel {
		// A sentinel needs a config file of its own, which it rewrites.
		conf := filepath.Join(s.dir, "sentinel.conf")
		body := fmt.Sprintf("port %d\nbind 127.0.0.1\nprotected-mode no\ndir %s\nloglevel warning\n", s.port, s.dir)
		if _, err := os.Stat(conf); err != nil {
			if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
				return err
			}
		}
		args = []string{conf, "--sentinel"}
	}
	bin := s.bin
	if s.cfg.sentinel {
		// Debian's redis-sentinel package installs the same binary under
		// that name; without it, redis-server --sentinel is a sentinel too.
		if b, err := exec.LookPath("redis-sentinel"); err == nil {
			bin, args = b, args[:1]
		}
	}
	cmd := exec.Command(bin, args...)
	// The server must not outlive a test process that is killed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out := &strings.Builder{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return err
	}
	s.cmd, s.out, s.done = cmd, out, make(chan struct{})
	done := s.done
	go func() { cmd.Wait(); close(done) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := s.Do("PING"); err == nil {
			return nil
		}
		select {
		case <-done:
			return fmt.Errorf("redis-server exited: %s", strings.TrimSpace(out.String()))
		case <-ctx.Done():
			s.Kill()
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.Kill()
			return fmt.Errorf("redis-server on %s did not answer PING within 10s", s.Addr)
		}
	}
}

// Kill stops the server at once (SIGKILL), keeping its directory, so
// Restart can bring it back with its data (with Config.Persist).
func (s *Server) Kill() {
	if s.cmd != nil && s.cmd.Process != nil {
		s.cmd.Process.Kill()
		<-s.done
	}
}

// running reports whether the server's process is up (not killed or
// closed, and not exited); a paused one is running. Cluster waits ask
// only running nodes, so a killed node does not stall them on a refused
// dial.
func (s *Server) running() bool {
	if s.done == nil {
		return false
	}
	select {
	case <-s.done:
		return false
	default:
		return true
	}
}

// Pause stops the server's process (SIGSTOP): it keeps its connections
// and answers nothing until Resume.
func (s *Server) Pause() error { return s.cmd.Process.Signal(syscall.SIGSTOP) }

// Resume continues a paused server (SIGCONT).
func (s *Server) Resume() error { return s.cmd.Process.Signal(syscall.SIGCONT) }

// Restart starts a killed server again on the same port and directory.
func (s *Server) Restart(ctx context.Context) error { return s.launch(ctx) }

// Close kills the server and removes its directory.
func (s *Server) Close() error {
	s.Kill()
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

// Do sends one command and returns its reply as text: a status or bulk
// string, an integer, or an array of bulk strings one per line; an error
// reply as an error. It speaks RESP
// directly so the helper needs no client library.
func (s *Server) Do(args ...string) (string, error) {
	var c net.Conn
	var err error
	d := &net.Dialer{Timeout: time.Second}
	if s.cfg.TLS != nil {
		c, err = tls.DialWithDialer(d, "tcp", s.Addr, s.cfg.TLS)
	} else {
		c, err = d.Dial("tcp", s.Addr)
	}
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	var req strings.Builder
	fmt.Fprintf(&req, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&req, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := io.WriteString(c, req.String()); err != nil {
		return "", err
	}
	r := bufio.NewReader(c)
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimRight(line, "\r\n")
	switch {
	case strings.HasPrefix(line, "+"), strings.HasPrefix(line, ":"):
		return line[1:], nil
	case strings.HasPrefix(line, "-"):
		return "", errors.New(line[1:])
	case strings.HasPrefix(line, "$"):
		return readBulk(r, line)
	case strings.HasPrefix(line, "*"):
		// An array of bulk strings (CLUSTER GETKEYSINSLOT): one per line.
		n, err := strconv.Atoi(line[1:])
		if err != nil {
			return "", err
		}
		items := make([]string, 0, max(n, 0))
		for range n {
			l, err := r.ReadString('\n')
			if err != nil {
				return "", err
			}
			item, err := readBulk(r, strings.TrimRight(l, "\r\n"))
			if err != nil {
				return "", err
			}
			items = append(items, item)
		}
		return strings.Join(items, "\n"), nil
	}
	return "", fmt.Errorf("unexpected reply %q", line)
}

// readBulk reads the body of the bulk string whose header is line ("$n").
func readBulk(r *bufio.Reader, line string) (string, error) {
	n, err := strconv.Atoi(strings.TrimPrefix(line, "$"))
	if err != nil || n < 0 {
		return "", err
	}
	buf := make([]byte, n+2)
	if _, err := io.ReadFull(r, buf); err != nil {
		return "", err
	}
	return string(buf[:n]), nil
}
