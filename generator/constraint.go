package generator

import (
	"go/ast"
	"go/build/constraint"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/tools/go/packages"
)

// Build constraints. seqby_gen.go has none, so it must not name anything
// that some platform or build leaves out: a marked type, or a handle method
// its registration calls, declared in a file with a build constraint is
// refused at the marker or method. Which files are constrained is read from
// the files themselves (//go:build and // +build lines, a GOOS or GOARCH
// file name suffix, import "C"), both the files the go command included
// for this platform and those it left out, so the outcome is the same
// wherever seqgen runs. Left-out files of another package name (a
// //go:build ignore script in package main) are not part of the package
// and are skipped.

// constrainedFile is a file of a package that is not built everywhere.
type constrainedFile struct {
	path string
	why  string // e.g. "//go:build linux"
	file *ast.File
}

// constrainedFiles parses the non-test files of p, included or left out on
// this platform, and returns those with a build constraint that declare
// package p.Name, each parsed with its comments into fset.
func constrainedFiles(fset *token.FileSet, p *packages.Package) []constrainedFile {
	var out []constrainedFile
	seen := map[string]bool{}
	for _, name := range append(append([]string{}, p.GoFiles...), p.IgnoredFiles...) {
		base := filepath.Base(name)
		if seen[name] || !strings.HasSuffix(base, ".go") || strings.HasSuffix(base, "_test.go") || base == GenFile {
			continue
		}
		seen[name] = true
		head, err := parser.ParseFile(token.NewFileSet(), name, nil, parser.ImportsOnly|parser.ParseComments)
		if err != nil || head.Name.Name != p.Name {
			continue
		}
		why := fileConstraint(name, head)
		if why == "" {
			continue
		}
		f, _ := parser.ParseFile(fset, name, nil, parser.ParseComments|parser.SkipObjectResolution)
		if f == nil {
			continue
		}
		out = append(out, constrainedFile{path: name, why: why, file: f})
	}
	return out
}

// fileConstraint describes the build constraint of the file named name
// whose header (package clause, imports, comments) is f: "" when it is
// built wherever its package is.
func fileConstraint(name string, f *ast.File) string {
	for _, g := range f.Comments {
		if g.Pos() >= f.Package {
			break
		}
		for _, c := range g.List {
			if constraint.IsGoBuild(c.Text) {
				if expr, err := constraint.Parse(c.Text); err == nil {
					return "//go:build " + expr.String()
				}
				return c.Text
			}
		}
	}
	for _, g := range f.Comments {
		if g.Pos() >= f.Package {
			break
		}
		for _, c := range g.List {
			if constraint.IsPlusBuild(c.Text) {
				return c.Text
			}
		}
	}
	if s := nameConstraint(filepath.Base(name)); s != "" {
		return "file name suffix " + s
	}
	for _, imp := range f.Imports {
		if imp.Path.Value == `"C"` {
			return `import "C", built only with cgo`
		}
	}
	return ""
}

// nameConstraint returns the _GOOS, _GOARCH or _GOOS_GOARCH suffix of a
// file name that the go command reads as a build constraint, else "".
func nameConstraint(base string) string {
	name := strings.TrimSuffix(strings.TrimSuffix(base, ".go"), "_test")
	i := strings.Index(name, "_")
	if i < 0 {
		return ""
	}
	parts := strings.Split(name[i:], "_")
	n := len(parts)
	if n >= 2 && knownOS[parts[n-2]] && knownArch[parts[n-1]] {
		return "_" + parts[n-2] + "_" + parts[n-1]
	}
	if n >= 1 && (knownOS[parts[n-1]] || knownArch[parts[n-1]]) {
		return "_" + parts[n-1]
	}
	return ""
}

// knownOS and knownArch are the go command's lists (internal/syslist),
// which file name suffixes are matched against.
var knownOS = setOf("aix", "android", "darwin", "dragonfly", "freebsd", "hurd", "illumos", "ios", "js",
	"linux", "nacl", "netbsd", "openbsd", "plan9", "solaris", "wasip1", "windows", "zos")

var knownArch = setOf("386", "amd64", "amd64p32", "arm", "armbe", "arm64", "arm64be", "loong64",
	"mips", "mipsle", "mips64", "mips64le", "mips64p32", "mips64p32le", "ppc", "ppc64", "ppc64le",
	"riscv", "riscv64", "s390", "s390x", "sparc", "sparc64", "wasm")

func setOf(words ...string) map[string]bool {
	m := map[string]bool{}
	for _, w := range words {
		m[w] = true
	}
	return m
}

// strayFiles finds the directories under the relative or absolute "dir/..."
// patterns (and "." or "./x" ones) that hold non-test .go files but no
// listed package: the go command leaves out a package all of whose files
// have build constraints excluding this platform. Their files of the
// directory's package are parsed with comments into fset, so that their
// markers are refused here as they are where the package is built.
func strayFiles(fset *token.FileSet, dir string, patterns []string, listed []*packages.Package) []constrainedFile {
	have := map[string]bool{}
	for _, p := range listed {
		if p.Dir != "" {
			have[filepath.Clean(p.Dir)] = true
		}
	}
	var out []constrainedFile
	seen := map[string]bool{}
	visit := func(d string) {
		if seen[d] || have[d] {
			return
		}
		seen[d] = true
		entries, err := os.ReadDir(d)
		if err != nil {
			return
		}
		var names []string
		for _, e := range entries {
			n := e.Name()
			if !e.IsDir() && strings.HasSuffix(n, ".go") && !strings.HasSuffix(n, "_test.go") && n != GenFile {
				names = append(names, filepath.Join(d, n))
			}
		}
		if len(names) == 0 {
			return
		}
		pkg, _ := packageName(d, "")
		for _, name := range names {
			f, _ := parser.ParseFile(fset, name, nil, parser.ParseComments|parser.SkipObjectResolution)
			if f == nil || f.Name.Name != pkg {
				continue
			}
			if why := fileConstraint(name, f); why != "" {
				out = append(out, constrainedFile{path: name, why: why, file: f})
			}
		}
	}
	for _, pat := range patterns {
		rec := strings.HasSuffix(pat, "/...") || pat == "..."
		base := strings.TrimSuffix(strings.TrimSuffix(pat, "..."), "/")
		if base == "" && pat == "..." {
			continue // every package of every module: not a directory
		}
		if !filepath.IsAbs(base) && base != "." && base != ".." && !strings.HasPrefix(base, "./") && !strings.HasPrefix(base, "../") {
			continue // an import path: the go command reports what it cannot find
		}
		if !filepath.IsAbs(base) {
			base = filepath.Join(dir, base)
		}
		base = filepath.Clean(base)
		if !rec {
			visit(base)
			continue
		}
		filepath.WalkDir(base, func(path string, d fs.DirEntry, err error) error {
			if err != nil || !d.IsDir() {
				return nil
			}
			name := d.Name()
			if path != base && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") ||
				name == "testdata" || name == "vendor" || exists(filepath.Join(path, "go.mod"))) {
				return filepath.SkipDir
			}
			visit(filepath.Clean(path))
			return nil
		})
	}
	return out
}
