package generator

import (
	"path/filepath"
	"testing"
)

func TestNewLoadError(t *testing.T) {
	dir := filepath.FromSlash("/mod")
	abs := filepath.Join(dir, "b", "b.go")
	tests := []struct {
		name string
		msgs []string
		want string
	}{
		{"absolute and relative paths print module-relative",
			[]string{abs + ":3:9: expected ')', found '{'", "a/a.go:3:8: no required module provides package x; to add it:\n\tgo get x"},
			"a/a.go:3:8: no required module provides package x; to add it: go get x\nb/b.go:3:9: expected ')', found '{'"},
		{"each error once",
			[]string{abs + ":3:9: expected ')'", "b/b.go:3:9: expected ')'", abs + ":3:9: expected ')'"},
			"b/b.go:3:9: expected ')'"},
		{"no position, after the positioned ones",
			[]string{"pattern ./x/...: no such file", "b/b.go:1: bad"},
			"b/b.go:1: bad\nseqgen: cannot load packages: pattern ./x/...: no such file"},
		{"a go.mod error, out of go/packages' wrapper",
			[]string{"err: exit status 1: stderr: go: errors parsing go.mod:\n" + filepath.Join(dir, "go.mod") + ":18: unknown directive: bogus\n"},
			"go.mod:18: unknown directive: bogus"},
		{"a colon that is not a position",
			[]string{"go: cannot find main module: see 'go help modules'"},
			"seqgen: cannot load packages: go: cannot find main module: see 'go help modules'"},
	}
	for _, tt := range tests {
		got := newLoadError(dir, tt.msgs...).Format(dir)
		if got != filepath.FromSlash(tt.want) && got != tt.want {
			t.Errorf("%s:\ngot  %q\nwant %q", tt.name, got, tt.want)
		}
	}
}
