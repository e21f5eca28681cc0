package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/seqby/seqby/runtime/inspect"
	"github.com/seqby/seqby/runtime/inspect/console"
)

// consoleTokenEnv holds serve -write's token.
const consoleTokenEnv = "SEQBY_CONSOLE_TOKEN"

// serve runs the operator console until ctx ends (SIGINT, SIGTERM).
func serve(ctx context.Context, in *inspect.Inspector, o *opts) error {
	opts := console.Options{Write: o.write}
	if o.write {
		opts.Token = os.Getenv(consoleTokenEnv)
	}
	con, err := console.New(in.WithVerifyBound(o.verifyBound), opts)
	if err != nil {
		return err
	}
	defer con.Close()
	ln, err := net.Listen("tcp", o.addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", o.addr, err)
	}
	mode := "read-only"
	if o.write {
		mode = "write access"
	}
	fmt.Fprintf(o.out, "seqby console on http://%s/ (%s); stop it with ^C\n", ln.Addr(), mode)
	if w := plainHTTPWarning(ln.Addr()); w != "" {
		fmt.Fprintln(o.errOut, w)
	}
	srv := &http.Server{Handler: con, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shut); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// plainHTTPWarning is serve's warning for an address off the machine
// ("" for a loopback one).
func plainHTTPWarning(addr net.Addr) string {
	if a, ok := addr.(*net.TCPAddr); ok && a.IP.IsLoopback() {
		return ""
	}
	return fmt.Sprintf("seqbyctl serve: warning: %s is not a loopback address: the console speaks plain HTTP, so its pages (and, with -write, the token) cross the network in clear; serve it behind TLS and a proxy you trust", addr)
}
