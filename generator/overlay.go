package generator

import (
	"bytes"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// ownOutput finds seqgen's previous output under dir and maps each file to
// its bare package clause, for every go command seqgen runs. Stale output
// must not decide what seqgen sees: it may import a package that has moved,
// name a package clause that was renamed, or call methods that no longer
// exist. A seqby_gen.go without seqgen's header is someone else's file: it
// is listed in foreign, and left alone.
func ownOutput(dir string) (overlay map[string][]byte, foreign []string) {
	overlay = map[string][]byte{}
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
		if name := packageName(filepath.Dir(abs), abs); name != "" {
			overlay[abs] = []byte("package " + name + "\n")
		}
		return nil
	})
	sort.Strings(foreign)
	return overlay, foreign
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
// many, is in it nowhere.
func packageName(dir, gen string) string {
	entries, _ := os.ReadDir(dir)
	plain, constrained := map[string]int{}, map[string]int{}
	fset := token.NewFileSet()
	for _, e := range entries {
		n := e.Name()
		if e.IsDir() || !strings.HasSuffix(n, ".go") || strings.HasSuffix(n, "_test.go") || n == GenFile {
			continue
		}
		path := filepath.Join(dir, n)
		if f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly|parser.ParseComments); err == nil {
			if fileConstraint(path, f) == "" {
				plain[f.Name.Name]++
			} else {
				constrained[f.Name.Name]++
			}
		}
	}
	for _, count := range []map[string]int{plain, constrained} {
		best := ""
		for name, n := range count {
			if n > count[best] || (n == count[best] && name < best) {
				best = name
			}
		}
		if best != "" {
			return best
		}
	}
	if f, err := parser.ParseFile(fset, gen, nil, parser.PackageClauseOnly); err == nil {
		return f.Name.Name
	}
	return ""
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
