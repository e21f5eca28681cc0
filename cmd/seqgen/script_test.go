package main

import (
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/rogpeppe/go-internal/gotooltest"
	"github.com/rogpeppe/go-internal/testscript"
)

var update = flag.Bool("update", false, "rewrite the cmp goldens of testdata/script/*.txtar with the actual output")

func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"seqgen": func() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) },
	})
}

// TestScripts runs testdata/script/*.txtar. Each script is a module of its
// own in $WORK; Setup points its go.mod at this checkout and lets the go
// command use the module cache offline.
func TestScripts(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	modcache, err := exec.Command("go", "env", "GOMODCACHE").Output()
	if err != nil {
		t.Fatal(err)
	}
	p := testscript.Params{
		Dir:           filepath.Join(root, "testdata", "script"),
		UpdateScripts: *update,
		Setup: func(env *testscript.Env) error {
			env.Setenv("SEQBY_ROOT", root)
			env.Setenv("GOMODCACHE", string(trimNL(modcache)))
			env.Setenv("GOFLAGS", "-mod=mod")
			env.Setenv("GOPROXY", "off")
			env.Setenv("GOSUMDB", "off")
			gomod := filepath.Join(env.WorkDir, "go.mod")
			if _, err := os.Stat(gomod); err != nil {
				return nil
			}
			cmd := exec.Command("go", "mod", "edit",
				"-require=github.com/seqby/seqby@v0.0.0-00010101000000-000000000000",
				"-replace=github.com/seqby/seqby="+root)
			cmd.Dir = env.WorkDir
			cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod")
			if out, err := cmd.CombinedOutput(); err != nil {
				env.T().Fatal("go mod edit: ", err, string(out))
			}
			return nil
		},
	}
	if err := gotooltest.Setup(&p); err != nil {
		t.Fatal(err)
	}
	testscript.Run(t, p)
}

func trimNL(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}
