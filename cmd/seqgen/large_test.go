package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/seqby/seqby/generator"
)

// The size of the module writeLargeModule writes: issue #14 asks that a
// module of 500 events across 50 packages and 100 handlers generates and
// passes -check cleanly.
const (
	largePackages      = 50
	eventsPerPackage   = 10
	handlersPerPackage = 2
)

// writeLargeModule writes, under dir, a module whose go.mod points at
// this checkout: largePackages event packages (evNN, one category each,
// keyed by account), each with eventsPerPackage events, and as many
// handler packages (hNN), each with handlersPerPackage keyed handlers of
// five events of its package.
func writeLargeModule(t testing.TB, dir string) {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, text string) {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", fmt.Sprintf("module example.com/big\n\ngo 1.26\n\nrequire github.com/seqby/seqby v0.0.0-00010101000000-000000000000\n\nreplace github.com/seqby/seqby => %s\n", root))
	for p := range largePackages {
		var ev strings.Builder
		fmt.Fprintf(&ev, "// Package ev%02d holds the events of category cat%02d.\npackage ev%02d\n", p, p, p)
		for e := range eventsPerPackage {
			fmt.Fprintf(&ev, "\n// E%d is an event.\n//\n//seqby:event=cat%02d\n", e, p)
			if e == 0 {
				ev.WriteString("//seqby:key=account\n")
			}
			fmt.Fprintf(&ev, "type E%d struct {\n\tAccount string `json:\"account\"`\n\tN       int    `json:\"n\"`\n}\n", e)
		}
		write(fmt.Sprintf("ev%02d/events.go", p), ev.String())
		var h strings.Builder
		fmt.Fprintf(&h, "// Package h%02d holds handlers of category cat%02d.\npackage h%02d\n\nimport (\n\t\"context\"\n\n\t\"example.com/big/ev%02d\"\n)\n", p, p, p, p)
		for k := range handlersPerPackage {
			fmt.Fprintf(&h, "\n// H%d is a handler.\n//\n//seqby:handler\n//seqby:key=account\ntype H%d struct{ n int }\n", k, k)
			for e := k * 5; e < k*5+5; e++ {
				fmt.Fprintf(&h, "\n// On%d handles E%d.\nfunc (h *H%d) On%d(ctx context.Context, e ev%02d.E%d) error { h.n += e.N; return nil }\n", e, e, k, e, p, e)
			}
		}
		write(fmt.Sprintf("h%02d/handlers.go", p), h.String())
	}
}

// goEnv is the environment for the go command in the large module: the
// module cache offline, as the scripts run.
func goEnv(t testing.TB) []string {
	t.Helper()
	return append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOSUMDB=off")
}

// genLarge generates the module in dir, returning how long it took.
func genLarge(t testing.TB, dir string) time.Duration {
	t.Helper()
	start := time.Now()
	res, err := generator.Generate(generator.Config{Dir: dir, Env: goEnv(t), Patterns: []string{"./..."}})
	if err != nil {
		t.Fatalf("generate: %v", err)
	}
	if err := res.Write(); err != nil {
		t.Fatal(err)
	}
	return time.Since(start)
}

// goVet runs go vet ./... in dir, returning how long it took.
func goVet(t testing.TB, dir string) time.Duration {
	t.Helper()
	start := time.Now()
	cmd := exec.Command("go", "vet", "./...")
	cmd.Dir, cmd.Env = dir, goEnv(t)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go vet ./...: %v\n%s", err, out)
	}
	return time.Since(start)
}

// TestLargeModule: 500 events across 50 packages and 100 handlers
// generate, pass -check, build and vet.
func TestLargeModule(t *testing.T) {
	dir := t.TempDir()
	writeLargeModule(t, dir)
	genLarge(t, dir)
	gen, err := filepath.Glob(filepath.Join(dir, "*", "seqby_gen.go"))
	if err != nil || len(gen) != 2*largePackages {
		t.Fatalf("%d generated files (%v), want %d", len(gen), err, 2*largePackages)
	}
	res, err := generator.Generate(generator.Config{Dir: dir, Env: goEnv(t), Patterns: []string{"./..."}})
	if err != nil {
		t.Fatal(err)
	}
	if d := res.Diff(dir); len(d) > 0 {
		t.Fatalf("-check after generating finds it stale:\n%s", d)
	}
	goVet(t, dir)
}

// BenchmarkLargeModule reports seqgen's time on the large module next to
// go vet ./... of the same module (both warm: the build cache holds the
// dependencies, as in a developer's loop). make bench runs it.
func BenchmarkLargeModule(b *testing.B) {
	dir := b.TempDir()
	writeLargeModule(b, dir)
	genLarge(b, dir)
	goVet(b, dir) // warm the cache
	var gen, vet time.Duration
	for b.Loop() {
		gen += genLarge(b, dir)
		vet += goVet(b, dir)
	}
	b.ReportMetric(gen.Seconds()/float64(b.N), "seqgen-s")
	b.ReportMetric(vet.Seconds()/float64(b.N), "vet-s")
}
