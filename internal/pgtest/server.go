// Package pgtest starts a private PostgreSQL cluster on a free loopback
// port for tests and test harnesses, as internal/redistest does for
// Redis: no test ever touches a shared server (and never the default port
// 5432, where this machine kind runs one).
//
// The cluster lives in a temporary directory (initdb with trust
// authentication, user postgres, no locale, UTF8) and runs with fsync off.
// initdb and postgres refuse to run as root: when the test runs as root
// they run as the "postgres" OS user, which owns the directory.
package pgtest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // driver "pgx"
)

// ErrNoPostgres means no PostgreSQL server binaries were found.
var ErrNoPostgres = errors.New("pgtest: initdb and postgres not found on PATH nor in /usr/lib/postgresql/*/bin; install them (apt-get install postgresql)")

// Server is a running private PostgreSQL cluster owned by the caller.
type Server struct {
	// DSN connects to the cluster's "postgres" database as user postgres
	// (a URL for pgx: postgres://postgres@127.0.0.1:PORT/postgres).
	DSN string
	// Port is the loopback port the server listens on.
	Port int

	dir  string
	cmd  *exec.Cmd
	done chan struct{}
	out  *strings.Builder
	dbs  atomic.Int64
}

// Binaries returns the directory holding initdb and postgres: PATH first,
// then the newest /usr/lib/postgresql/*/bin.
func Binaries() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		if _, err := exec.LookPath("postgres"); err == nil {
			return filepath.Dir(p), nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		if isExec(filepath.Join(d, "initdb")) && isExec(filepath.Join(d, "postgres")) {
			return d, nil
		}
	}
	return "", ErrNoPostgres
}

func version(bin string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(bin)))
	return n
}

func isExec(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

// Start runs initdb in a new temporary directory and starts postgres on a
// free loopback port, returning once it accepts connections. Stop it with
// Close. It needs no *testing.T so a multi-process harness can use it too.
func Start(ctx context.Context) (*Server, error) {
	bin, err := Binaries()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "pgtest-")
	if err != nil {
		return nil, err
	}
	cred, err := credential(dir)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	data := filepath.Join(dir, "data")
	initdb := exec.CommandContext(ctx, filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres", "-A", "trust",
		"--no-locale", "-E", "UTF8", "--no-sync")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	initdb.Env = append(os.Environ(), "LC_ALL=C")
	if out, err := initdb.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("pgtest: initdb: %w: %s", err, strings.TrimSpace(string(out)))
	}
	var last error
	// A free port can be taken between probing and binding; try a few.
	for range 5 {
		port, err := freePort()
		if err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		s := &Server{Port: port, dir: dir,
			DSN: fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)}
		if last = s.launch(ctx, bin, data, cred); last == nil {
			return s, nil
		}
		if ctx.Err() != nil {
			break
		}
	}
	os.RemoveAll(dir)
	return nil, fmt.Errorf("pgtest: start postgres: %w", last)
}

// credential returns the credential to run PostgreSQL with: nil unless
// the process is root, then the postgres user's, which gets dir.
func credential(dir string) (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("pgtest: running as root, and initdb/postgres refuse root, but there is no postgres OS user to run them as: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if err := os.Chown(dir, uid, gid); err != nil {
		return nil, fmt.Errorf("pgtest: give %s to the postgres user: %w", dir, err)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

func (s *Server) launch(ctx context.Context, bin, data string, cred *syscall.Credential) error {
	cmd := exec.Command(filepath.Join(bin, "postgres"), "-D", data, "-p", strconv.Itoa(s.Port), "-k", s.dir,
		"-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "full_page_writes=off",
		"-c", "synchronous_commit=off", "-c", "max_connections=200")
	// The server must not outlive a test process that is killed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGKILL}
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	out := &strings.Builder{}
	cmd.Stdout, cmd.Stderr = &lockedWriter{b: out}, &lockedWriter{b: out}
	if err := cmd.Start(); err != nil {
		return err
	}
	s.cmd, s.out, s.done = cmd, out, make(chan struct{})
	done := s.done
	go func() { cmd.Wait(); close(done) }()
	db, err := sql.Open("pgx", s.DSN)
	if err != nil {
		s.kill()
		return err
	}
	defer db.Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		err := db.PingContext(pctx)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-done:
			return fmt.Errorf("postgres exited: %s", strings.TrimSpace(s.Output()))
		case <-ctx.Done():
			s.kill()
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.kill()
			return fmt.Errorf("postgres on port %d did not accept connections within 30s: %v", s.Port, err)
		}
	}
}

// CreateDatabase creates a new empty database and returns its DSN, so
// tests sharing one cluster do not share tables.
func (s *Server) CreateDatabase(ctx context.Context) (string, error) {
	name := fmt.Sprintf("t%d", s.dbs.Add(1))
	db, err := sql.Open("pgx", s.DSN)
	if err != nil {
		return "", err
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		return "", fmt.Errorf("pgtest: create database %s: %w", name, err)
	}
	return strings.Replace(s.DSN, "/postgres?", "/"+name+"?", 1), nil
}

// kill stops the server: immediate shutdown (SIGQUIT), then SIGKILL.
func (s *Server) kill() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	s.cmd.Process.Signal(syscall.SIGQUIT)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		s.cmd.Process.Kill()
		<-s.done
	}
}

// Close stops the server and removes its directory.
func (s *Server) Close() error {
	s.kill()
	return os.RemoveAll(s.dir)
}

func freePort() (int, error) {
	for range 20 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if port != 5432 {
			return port, nil
		}
	}
	return 0, errors.New("pgtest: no free loopback port")
}
