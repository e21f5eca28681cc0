package main

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"os"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/seqby/seqby/internal/redistest"
)

// serve runs the console on a free port, prints its URL, answers pages,
// and stops on SIGINT; -write without a token is a usage error.
func TestServe(t *testing.T) {
	s := redistest.New(t)
	t.Setenv("REDIS_URL", "redis://"+s.Addr)
	t.Setenv(consoleTokenEnv, "")
	var errb bytes.Buffer
	if code := run([]string{"serve", "-write"}, io.Discard, &errb); code != 2 || !strings.Contains(errb.String(), consoleTokenEnv) {
		t.Fatalf("serve -write without a token: exit %d, %s", code, errb.String())
	}
	pr, pw := io.Pipe()
	done := make(chan int, 1)
	go func() {
		done <- run([]string{"serve", "-addr", "127.0.0.1:0"}, pw, io.Discard)
		pw.Close()
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	go io.Copy(io.Discard, pr)
	m := regexp.MustCompile(`^seqby console on (http://127\.0\.0\.1:\d+/) \(read-only\)`).FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("serve printed %q", line)
	}
	res, err := http.Get(m[1])
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || !strings.Contains(string(body), "seqby console") {
		t.Fatalf("GET %s: %d\n%s", m[1], res.StatusCode, body)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("serve exited %d after SIGINT", code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not stop on SIGINT")
	}
}

// serve warns when it listens beyond the machine.
func TestPlainHTTPWarning(t *testing.T) {
	for _, tc := range []struct {
		addr string
		warn bool
	}{{"127.0.0.1:8080", false}, {"[::1]:8080", false}, {"0.0.0.0:8080", true}, {"192.0.2.7:80", true}} {
		a, err := net.ResolveTCPAddr("tcp", tc.addr)
		if err != nil {
			t.Fatal(err)
		}
		if got := plainHTTPWarning(a); (got != "") != tc.warn {
			t.Errorf("%s: warning %q, want one: %v", tc.addr, got, tc.warn)
		}
	}
}
