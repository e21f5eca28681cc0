package rdb

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The key layout is written down three times: in this package's doc (next
// to the code that builds it), the README and docs/runtime.md. The key
// column must be the same everywhere, in the same order.
func TestLayoutTablesAgree(t *testing.T) {
	pkg := docKeys(t)
	if len(pkg) < 10 {
		t.Fatalf("found %d keys in the package doc's layout table: %q", len(pkg), pkg)
	}
	for _, md := range []string{"../../../README.md", "../../../docs/runtime.md"} {
		if diff := cmp.Diff(pkg, markdownKeys(t, md)); diff != "" {
			t.Errorf("%s's key layout table differs from runtime/internal/rdb's package doc (-doc +%s):\n%s", md, md, diff)
		}
	}
}

// docKeys reads the first column of the layout table in doc.go.
func docKeys(t *testing.T) []string {
	src, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	in := false
	for _, line := range strings.Split(string(src), "\n") {
		switch {
		case strings.HasPrefix(line, "//\tkey "):
			in = true
		case in && strings.HasPrefix(line, "//\t"):
			keys = append(keys, strings.Fields(strings.TrimPrefix(line, "//\t"))[0])
		case in:
			return keys
		}
	}
	return keys
}

var mdKey = regexp.MustCompile("^\\| `([^`]+)` \\|")

// markdownKeys reads the first column of the "Redis key layout" table.
func markdownKeys(t *testing.T, path string) []string {
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(src), "# Redis key layout\n")
	if !ok {
		t.Fatalf("%s has no Redis key layout section", path)
	}
	var keys []string
	for _, line := range strings.Split(after, "\n") {
		if m := mdKey.FindStringSubmatch(line); m != nil {
			keys = append(keys, m[1])
		} else if len(keys) > 0 && !strings.HasPrefix(line, "|") {
			break
		}
	}
	return keys
}
