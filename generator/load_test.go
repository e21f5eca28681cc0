package generator

import (
	"encoding/json"
	"go/types"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/tools/go/packages"
)

// TestLoadHidesOutputFromExportData: with seqgen's previous output in the
// module, the packages beyond the loaded ones still come from the go
// command's export data, as on a first run (issue #25 item 6: an overlay
// given to go/packages type-checked every dependency from source, 3-4 times
// the time), and the export data of a module package was compiled with its
// seqby_gen.go hidden too.
func TestLoadHidesOutputFromExportData(t *testing.T) {
	dir := t.TempDir()
	gen := "// " + header + "\n\n"
	for name, text := range map[string]string{
		"go.mod":          "module example.com/m\n\ngo 1.26\n",
		"r/r.go":          "package r\n\nimport (\n\t\"strconv\"\n\n\t\"example.com/m/m1\"\n)\n\nvar _ = strconv.Itoa\n\nvar _ m1.T\n",
		"r/seqby_gen.go":  gen + "package r\n\nfunc Stale() {}\n",
		"m1/m1.go":        "package m1\n\nimport \"example.com/m/m2\"\n\ntype T = m2.T\n",
		"m2/m2.go":        "package m2\n\ntype T struct{}\n",
		"m2/seqby_gen.go": gen + "package m2\n\nfunc (T) Stale() {}\n",
	} {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	env := append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off", "GOPACKAGESDRIVER=off")
	ld, err := load(dir, env, []string{"./r"})
	if err != nil {
		t.Fatal(err)
	}
	if len(ld.roots) != 1 || len(ld.deps) != 1 {
		t.Fatalf("roots %v, deps %v: want r, and m1 (the module package r imports)", ld.roots, ld.deps)
	}
	r, m1 := ld.roots[0], ld.deps[0]
	if r.Types.Scope().Lookup("Stale") != nil {
		t.Errorf("r's stale seqby_gen.go was type-checked")
	}
	strconv := r.Imports["strconv"]
	if strconv == nil || strconv.Types == nil {
		t.Fatalf("strconv not loaded: %v", strconv)
	}
	if strconv.Syntax != nil {
		t.Errorf("strconv was type-checked from source (%d files), want its export data", len(strconv.Syntax))
	}
	m2 := m1.Imports["example.com/m/m2"]
	if m2 == nil || m2.Types == nil {
		t.Fatalf("m2 not loaded: %v", m2)
	}
	if m2.Syntax != nil {
		t.Errorf("m2 was type-checked from source, want its export data")
	}
	T := m2.Types.Scope().Lookup("T")
	if T == nil {
		t.Fatal("m2.T not found")
	}
	if obj, _, _ := types.LookupFieldOrMethod(T.Type(), true, m2.Types, "Stale"); obj != nil {
		t.Errorf("m2's export data has the stale method %v: compiled without the overlay", obj)
	}
}

// TestLoadErrorFirstOfLine: of the errors of one source line only the
// first is kept, the leftmost, and of those at one column the first given
// (issue #25 item 5); other lines and errors without a position stay.
func TestLoadErrorFirstOfLine(t *testing.T) {
	dir := filepath.FromSlash("/mod")
	got := newLoadError(dir,
		"b/b.go:3:11: expected ')', found 'EOF'",
		"b/b.go:3:11: missing ',' in parameter list",
		"b/b.go:3:9: expected ')', found '{'",
		"b/b.go:5:2: missing ',' in composite literal",
		"b/b.go:5:2: expected '}', found 'EOF'",
		"a/a.go:3:8: no required module provides package x",
		"pattern ./y/...: no such file",
		"pattern ./x/...: no such file",
	).Format(dir)
	want := filepath.FromSlash("a/a.go:3:8: no required module provides package x\n"+
		"b/b.go:3:9: expected ')', found '{'\n"+
		"b/b.go:5:2: missing ',' in composite literal\n") +
		"seqgen: cannot load packages: pattern ./x/...: no such file\n" +
		"seqgen: cannot load packages: pattern ./y/...: no such file"
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

// TestExternalDriver: a GOPACKAGESDRIVER gets the overlay as go/packages'
// Config.Overlay, since -overlay is the go command's flag.
func TestExternalDriver(t *testing.T) {
	if externalDriver([]string{"GOPACKAGESDRIVER=off"}) {
		t.Error("GOPACKAGESDRIVER=off counts as a driver")
	}
	if !externalDriver([]string{"GOPACKAGESDRIVER=off", "GOPACKAGESDRIVER=/opt/bazel/gopackagesdriver"}) {
		t.Error("GOPACKAGESDRIVER=/opt/bazel/gopackagesdriver (the last one) does not count as a driver")
	}
	overlay := map[string][]byte{"/m/a/seqby_gen.go": []byte("package a\n")}
	cfg := &packages.Config{Env: []string{"GOPACKAGESDRIVER=/opt/bazel/gopackagesdriver"}}
	if _, err := hide(cfg, overlay, nil); err != nil || cfg.Overlay == nil || cfg.BuildFlags != nil {
		t.Errorf("with a driver: Overlay %v, BuildFlags %v, err %v; want Config.Overlay", cfg.Overlay, cfg.BuildFlags, err)
	}
	cfg = &packages.Config{Env: []string{"GOPACKAGESDRIVER=off"}}
	cleanup, err := hide(cfg, overlay, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	if cfg.Overlay != nil || len(cfg.BuildFlags) != 1 || !strings.HasPrefix(cfg.BuildFlags[0], "-overlay=") {
		t.Errorf("without a driver: Overlay %v, BuildFlags %v; want -overlay", cfg.Overlay, cfg.BuildFlags)
	}
}

// TestOwnOutputRemovesWhatItCan: seqgen's previous output is hidden from
// the go command as an absent file (an empty replacement in -overlay, no
// file written) where its package has another file on every platform, and
// replaced by its package clause only where removing it would leave the
// package with no file on some platform: a directory holding only the
// generated file, or only build-constrained files besides it.
func TestOwnOutputRemovesWhatItCan(t *testing.T) {
	dir := t.TempDir()
	gen := "// " + header + "\n\npackage %s\n"
	files := map[string]string{
		"plain/a.go":           "package plain\n",
		"plain/seqby_gen.go":   strings.ReplaceAll(gen, "%s", "plain"),
		"alone/seqby_gen.go":   strings.ReplaceAll(gen, "%s", "alone"),
		"linux/a_linux.go":     "package linux\n",
		"linux/seqby_gen.go":   strings.ReplaceAll(gen, "%s", "linux"),
		"tagged/a.go":          "//go:build ignore\n\npackage tagged\n",
		"tagged/seqby_gen.go":  strings.ReplaceAll(gen, "%s", "tagged"),
		"foreign/a.go":         "package foreign\n",
		"foreign/seqby_gen.go": "package foreign\n",
	}
	for name, text := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	overlay, removable, foreign := ownOutput(dir)
	path := func(d string) string { return filepath.Join(dir, d, GenFile) }
	if len(foreign) != 1 || foreign[0] != path("foreign") {
		t.Errorf("foreign %v, want [%s]", foreign, path("foreign"))
	}
	for _, c := range []struct {
		dir       string
		removable bool
	}{{"plain", true}, {"alone", false}, {"linux", false}, {"tagged", false}} {
		if got := string(overlay[path(c.dir)]); got != "package "+c.dir+"\n" {
			t.Errorf("%s: overlay %q, want its package clause", c.dir, got)
		}
		if removable[path(c.dir)] != c.removable {
			t.Errorf("%s: removable %v, want %v", c.dir, removable[path(c.dir)], c.removable)
		}
	}

	flag, cleanup, err := overlayFlag(overlay, removable)
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	data, err := os.ReadFile(strings.TrimPrefix(flag, "-overlay="))
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct{ Replace map[string]string }
	if err := json.Unmarshal(data, &cfg); err != nil {
		t.Fatal(err)
	}
	if r, ok := cfg.Replace[path("plain")]; !ok || r != "" {
		t.Errorf("plain: replaced by %q (present %v), want \"\" (absent)", r, ok)
	}
	written, _ := filepath.Glob(filepath.Join(filepath.Dir(strings.TrimPrefix(flag, "-overlay=")), "*.go"))
	if len(written) != 3 {
		t.Errorf("%d replacement files written (%v), want 3: one for each package that needs its clause", len(written), written)
	}
}
