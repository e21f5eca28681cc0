package main

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"io/fs"
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

// writeRepoModule writes, under dir, seqby itself at its last commit
// (git archive HEAD): a module whose packages import 420 packages
// (go-redis, OpenTelemetry, Prometheus, pgx, SQLite, golang.org/x/tools),
// the size of a real application's dependencies, all in the module cache
// because seqby's own build needs them. A module that requires seqby from
// a temporary directory would not do: the go command then reads go.mod
// files of seqby's indirect requirements that the module cache lacks.
func writeRepoModule(t testing.TB, dir string) {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("git", "archive", "--format=tar", "HEAD")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Skipf("git archive HEAD: %v (not a git checkout?)", err)
	}
	tr := tar.NewReader(bytes.NewReader(out))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, filepath.FromSlash(h.Name))
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(p, 0o755)
		case tar.TypeReg:
			var data []byte
			if data, err = io.ReadAll(tr); err == nil {
				err = os.WriteFile(p, data, 0o644)
			}
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// generatedFiles lists the seqby_gen.go files under dir.
func generatedFiles(t testing.TB, dir string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && d.Name() == generator.GenFile {
			out = append(out, path)
		}
		return nil
	})
	if len(out) == 0 {
		t.Fatalf("no %s under %s", generator.GenFile, dir)
	}
	return out
}

// buildSeqgen builds the seqgen command into a temporary directory: the
// benchmark runs it as go generate does, a process per run, so that its
// peak memory can be read.
func buildSeqgen(b *testing.B) string {
	b.Helper()
	bin := filepath.Join(b.TempDir(), "seqgen")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// runStats adds up the runs of one kind: total wall time, the highest peak
// resident memory of one run, and how many.
type runStats struct {
	wall time.Duration
	rss  int64
	n    int
}

func (s *runStats) add(wall time.Duration, rss int64) {
	s.wall += wall
	s.rss = max(s.rss, rss)
	s.n++
}

func (s *runStats) report(b *testing.B, name string) {
	b.ReportMetric(s.wall.Seconds()/float64(s.n), name+"-s")
	if s.rss > 0 {
		b.ReportMetric(float64(s.rss)/(1<<20), name+"-MB")
	}
}

// runSeqgen runs the seqgen command in dir, which must succeed (with
// -check: find everything up to date), and records its time and peak
// memory in s.
func runSeqgen(b *testing.B, s *runStats, bin, dir string, args ...string) {
	b.Helper()
	cmd := exec.Command(bin, append(args, "./...")...)
	cmd.Dir, cmd.Env = dir, goEnv(b)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	wall := time.Since(start)
	if err != nil {
		b.Fatalf("seqgen %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	s.add(wall, peakRSS(cmd.ProcessState))
}

// BenchmarkLargeModule reports seqgen's times on the 500-event module and
// on seqby itself (420 dependency packages): a first run (no seqby_gen.go
// yet), a second run (regenerating, byte-identical) and a -check, each a
// process of its own with its peak memory, next to go vet ./... of the
// same module. All are warm: the build cache holds the dependencies, as in
// a developer's loop or a CI job with a cache. make bench runs it; the
// figures are in docs/benchmarks.md.
func BenchmarkLargeModule(b *testing.B) {
	bin := buildSeqgen(b)
	for _, m := range []struct {
		name  string
		write func(testing.TB, string)
	}{{"events500", writeLargeModule}, {"repo", writeRepoModule}} {
		b.Run(m.name, func(b *testing.B) {
			dir := b.TempDir()
			m.write(b, dir)
			// Rounds to warm the build cache: the module's packages
			// compiled without seqgen's output (first run), with it hidden
			// (second run, -check) and with it (go vet).
			var first, second, check runStats
			var vet time.Duration
			round := func() {
				for _, f := range generatedFiles(b, dir) {
					if err := os.Remove(f); err != nil {
						b.Fatal(err)
					}
				}
				runSeqgen(b, &first, bin, dir)
				runSeqgen(b, &second, bin, dir)
				runSeqgen(b, &check, bin, dir, "-check")
				vet += goVet(b, dir)
			}
			runSeqgen(b, &first, bin, dir)
			round() // a fresh module takes two rounds to run warm
			round()
			first, second, check, vet = runStats{}, runStats{}, runStats{}, 0
			for b.Loop() {
				round()
			}
			first.report(b, "first")
			second.report(b, "second")
			check.report(b, "check")
			b.ReportMetric(vet.Seconds()/float64(b.N), "vet-s")
		})
	}
}
