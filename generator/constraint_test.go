package generator

import (
	"go/parser"
	"go/token"
	"testing"
)

func TestNameConstraint(t *testing.T) {
	for name, want := range map[string]string{
		"x.go":                "",
		"linux.go":            "",
		"x_linux.go":          "_linux",
		"x_linux_test.go":     "_linux",
		"x_amd64.go":          "_amd64",
		"x_windows_arm64.go":  "_windows_arm64",
		"x_unix.go":           "",
		"x_darwin_foo.go":     "",
		"a_b_freebsd_386.go":  "_freebsd_386",
		"seqby_gen.go":        "",
		"x_linux_notarch.go":  "",
		"x_js_wasm.go":        "_js_wasm",
		"x_wasip1.go":         "_wasip1",
		"x_arm64_windows.go":  "_windows",
		"nats.go":             "",
		"x_plan9_mips64le.go": "_plan9_mips64le",
	} {
		if got := nameConstraint(name); got != want {
			t.Errorf("nameConstraint(%q) = %q, want %q", name, got, want)
		}
	}
}

func TestFileConstraint(t *testing.T) {
	for _, tc := range []struct{ name, src, want string }{
		{"a.go", "package a\n", ""},
		{"a.go", "//go:build linux && !cgo\n\npackage a\n", "//go:build linux && !cgo"},
		{"a.go", "// Copyright\n\n//go:build ignore\n\npackage main\n", "//go:build ignore"},
		{"a.go", "// +build !windows\n\npackage a\n", "// +build !windows"},
		{"a.go", "//go:build linux\n// +build linux\n\npackage a\n", "//go:build linux"},
		{"a.go", "package a\n\n//go:build linux\n", ""},
		{"a_darwin.go", "package a\n", "file name suffix _darwin"},
		{"a.go", "package a\n\n// int f(void) { return 1; }\nimport \"C\"\n", `import "C", built only with cgo`},
	} {
		f, err := parser.ParseFile(token.NewFileSet(), tc.name, tc.src, parser.ImportsOnly|parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		if got := fileConstraint(tc.name, f); got != tc.want {
			t.Errorf("fileConstraint(%q, %q) = %q, want %q", tc.name, tc.src, got, tc.want)
		}
	}
}
