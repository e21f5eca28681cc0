package generator

import (
	"bytes"
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/tools/go/packages"
)

// ownOutput finds seqgen's previous output under dir and maps each file to
// its bare package clause, for every go command seqgen runs. Stale output
// must not decide what seqgen sees: it may import a package that has moved,
// name a package clause that was renamed, or call methods that no longer
// exist. A seqby_gen.go without seqgen's header is someone else's file: it
// is listed in foreign, and left alone.
//
// removable holds the files whose package has another file on every
// platform: the go command is told those do not exist at all, which
// costs it nothing, where a replacement is a file to write and hash (on a
// slow disk, 100 files cost seqgen 100 ms, a third of a run).
func ownOutput(dir string) (overlay map[string][]byte, removable map[string]bool, foreign []string) {
	overlay, removable = map[string][]byte{}, map[string]bool{}
	root := dir
	if root == "" {
		root = "."
	}
	filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.IsDir() {
			name := d.Name()
			if path != root && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") ||
				name == "testdata" || name == "vendor" || name == "node_modules" || exists(filepath.Join(path, "go.mod"))) {
				return filepath.SkipDir
			}
			return nil
		}
		if d.Name() != GenFile {
			return nil
		}
		abs, err := filepath.Abs(path)
		if err != nil {
			return nil
		}
		if !isOwnOutput(abs) {
			foreign = append(foreign, abs)
			return nil
		}
		if name, plain := packageName(filepath.Dir(abs), abs); name != "" {
			overlay[abs] = []byte("package " + name + "\n")
			removable[abs] = plain
		}
		return nil
	})
	sort.Strings(foreign)
	return overlay, removable, foreign
}

// hide has the go command cfg runs read each file of overlay as its
// replacement, or as absent if it is removable: through its -overlay flag,
// or, for a GOPACKAGESDRIVER, as go/packages' Config.Overlay (-overlay is
// the go command's flag). The flag is what keeps export data usable: given
// Config.Overlay, go/packages trusts no export data and type-checks every
// dependency from source. cleanup removes what it wrote.
func hide(cfg *packages.Config, overlay map[string][]byte, removable map[string]bool) (cleanup func(), err error) {
	switch {
	case len(overlay) == 0:
		return func() {}, nil
	case externalDriver(cfg.Env):
		cfg.Overlay = overlay
		return func() {}, nil
	}
	flag, cleanup, err := overlayFlag(overlay, removable)
	if err != nil {
		return nil, err
	}
	cfg.BuildFlags = append(cfg.BuildFlags, flag)
	return cleanup, nil
}

// overlayFlag writes overlay where the go command's -overlay flag reads it
// (a JSON file naming, for each file, a file holding what replaces it, or
// "" for a removable file, which the go command then takes as absent; all
// in a new temporary directory that cleanup removes) and returns that flag.
// The go command compiles the module's packages with the replacements, so
// the export data of a package that imports one stays consistent with it.
func overlayFlag(overlay map[string][]byte, removable map[string]bool) (flag string, cleanup func(), err error) {
	tmp, err := os.MkdirTemp("", "seqgen-overlay-")
	if err != nil {
		return "", nil, err
	}
	cleanup = func() { os.RemoveAll(tmp) }
	names := make([]string, 0, len(overlay))
	for name := range overlay {
		names = append(names, name)
	}
	sort.Strings(names)
	replace := map[string]string{}
	for i, name := range names {
		if removable[name] {
			replace[name] = ""
			continue
		}
		file := filepath.Join(tmp, strconv.Itoa(i)+".go")
		if err := os.WriteFile(file, overlay[name], 0o666); err != nil {
			cleanup()
			return "", nil, err
		}
		replace[name] = file
	}
	data, err := json.Marshal(struct{ Replace map[string]string }{replace})
	if err == nil {
		err = os.WriteFile(filepath.Join(tmp, "overlay.json"), data, 0o666)
	}
	if err != nil {
		cleanup()
		return "", nil, err
	}
	return "-overlay=" + filepath.Join(tmp, "overlay.json"), cleanup, nil
}

// parseHiding is go/packages' parser with the overlay applied: files the
// go command reads through -overlay are parsed with their replacements.
// Without parser.AllErrors, it reports (like go build) the first error of a
// line and not the ones it sets off beside it.
func parseHiding(overlay map[string][]byte) func(*token.FileSet, string, []byte) (*ast.File, error) {
	return func(fset *token.FileSet, name string, src []byte) (*ast.File, error) {
		if content, ok := overlay[name]; ok {
			src = content
		} else if filepath.Base(name) == GenFile {
			// The same file under another name (a symbolic link).
			if fi, err := os.Stat(name); err == nil {
				for f, content := range overlay {
					if other, err := os.Stat(f); err == nil && os.SameFile(fi, other) {
						src = content
						break
					}
				}
			}
		}
		return parser.ParseFile(fset, name, src, parser.ParseComments)
	}
}

// externalDriver reports whether go/packages will ask a GOPACKAGESDRIVER
// (as under Bazel) rather than the go command, which it does when the
// variable names one or, unset, when gopackagesdriver is on the PATH.
func externalDriver(env []string) bool {
	if env == nil {
		env = os.Environ()
	}
	tool := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "GOPACKAGESDRIVER="); ok {
			tool = v
		}
	}
	if tool == "off" {
		return false
	}
	if tool == "" {
		_, err := exec.LookPath("gopackagesdriver")
		return err == nil
	}
	return true
}

// isOwnOutput reports whether the file starts with seqgen's header.
func isOwnOutput(path string) bool {
	data, err := os.ReadFile(path)
	return err == nil && bytes.HasPrefix(data, []byte("// "+header+"\n"))
}

// packageName is the package its other files declare (the most common
// clause among them, test files aside), else the generated file's own.
// Files without a build constraint count first: they are in the package on
// every platform, while a //go:build ignore script of package main, however
// many, is in it nowhere. plain reports whether any such file is there.
func packageName(dir, gen string) (name string, plain bool) {
	entries, _ := os.ReadDir(dir)
	unconstrained, constrained := map[string]int{}, map[string]int{}
	fset := token.NewFileSet()
	for _, e := range entries {
		n := e.Name()
		if e.IsDir() || !strings.HasSuffix(n, ".go") || strings.HasSuffix(n, "_test.go") || n == GenFile {
			continue
		}
		path := filepath.Join(dir, n)
		if f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly|parser.ParseComments); err == nil {
			if fileConstraint(path, f) == "" {
				unconstrained[f.Name.Name]++
			} else {
				constrained[f.Name.Name]++
			}
		}
	}
	for _, count := range []map[string]int{unconstrained, constrained} {
		best := ""
		for name, n := range count {
			if n > count[best] || (n == count[best] && name < best) {
				best = name
			}
		}
		if best != "" {
			return best, len(unconstrained) > 0
		}
	}
	if f, err := parser.ParseFile(fset, gen, nil, parser.PackageClauseOnly); err == nil {
		return f.Name.Name, false
	}
	return "", false
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
