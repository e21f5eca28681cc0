package seqby

import (
	"bufio"
	"bytes"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// heavy lists what a user who imports only the runtime (and its test kit
// and inspector) must not have to compile: the outbox's SQL drivers, the
// generator's dependencies, and the metrics and tracing SDKs, which are
// the user's choice (the runtime takes the OpenTelemetry API only). Each
// is a module path or a package path prefix.
var heavy = []string{
	"github.com/jackc/pgx",                // the outbox's PostgreSQL driver
	"modernc.org/sqlite",                  // the outbox's and the demo's SQLite, with modernc.org/libc
	"modernc.org/libc",                    // the bulk of modernc.org/sqlite
	"github.com/alicebob/miniredis",       // the test kit's embedded Redis
	"golang.org/x/tools",                  // seqgen's package loader
	"github.com/dave/jennifer",            // seqgen's code writer
	"go.opentelemetry.io/otel/sdk",        // an OpenTelemetry SDK is the application's
	"go.opentelemetry.io/otel/exporters",  // and so are its exporters
	"github.com/prometheus/client_golang", // and the Prometheus client
	"google.golang.org/protobuf",          // only protobuf users need it
	"github.com/chromedp",                 // the console's browser test drives Chromium with it
}

// depRule is what one package of the module may pull: nothing in heavy
// but the prefixes in allow.
type depRule struct {
	root  string
	allow []string
}

// depRules: the runtime, the inspector and the test kit (which embeds
// miniredis, the one heavy dependency a test build is allowed), and the
// outbox, which imports pgx for PostgreSQL's error codes and LISTEN (its
// users with SQLite compile pgx too, but never modernc.org/sqlite unless
// they import it themselves).
var depRules = []depRule{
	{root: "github.com/seqby/seqby/runtime"},
	{root: "github.com/seqby/seqby/runtime/inspect"},
	{root: "github.com/seqby/seqby/runtime/inspect/console"},
	{root: "github.com/seqby/seqby/runtime/seqbytest", allow: []string{"github.com/alicebob/miniredis"}},
	{root: "github.com/seqby/seqby/outbox", allow: []string{"github.com/jackc/pgx"}},
}

// TestDeps fails, naming the import chain, when a package a runtime-only
// user compiles pulls one of heavy: each one cost that user's first build
// seconds of CPU (docs/benchmarks.md, 2026-12-02). One go list run reads
// the import graph of all roots.
func TestDeps(t *testing.T) {
	args := []string{"list", "-deps", "-f", "{{.ImportPath}}{{range .Imports}} {{.}}{{end}}"}
	for _, r := range depRules {
		args = append(args, r.root)
	}
	graph := listGraph(t, args...)
	for _, r := range depRules {
		if _, ok := graph[r.root]; !ok {
			t.Fatalf("go list did not report %s; the test would check nothing", r.root)
		}
		if chain := heavyChain(graph, r.root, r.allow); chain != nil {
			t.Errorf("%s pulls %s, which a user importing only the runtime must not compile; import chain:\n\t%s\n"+
				"move the import behind a package the user opts into, or drop it",
				r.root, chain[len(chain)-1], strings.Join(chain, "\n\t-> "))
		}
	}
	// The check is not vacuous: the outbox, under the runtime's rule,
	// is refused for pgx, by the chain through the outbox's own import.
	chain := heavyChain(graph, "github.com/seqby/seqby/outbox", nil)
	if len(chain) < 2 || !strings.HasPrefix(chain[len(chain)-1], "github.com/jackc/pgx/") {
		t.Errorf("the outbox without its pgx allowance gave chain %q, want one ending in pgx", chain)
	}
}

// TestDepsChain pins heavyChain on small graphs: the shortest chain,
// allowances by prefix, and no false match on a longer module name.
func TestDepsChain(t *testing.T) {
	graph := map[string][]string{
		"a":                                {"b", "c"},
		"b":                                {"golang.org/x/tools/go/packages"},
		"c":                                {"d"},
		"d":                                {"github.com/jackc/pgx/v5"},
		"golang.org/x/tools/go/packages":   nil,
		"github.com/jackc/pgx/v5":          nil,
		"e":                                {"golang.org/x/toolsmith", "github.com/alicebob/miniredis/v2"},
		"golang.org/x/toolsmith":           nil,
		"github.com/alicebob/miniredis/v2": nil,
	}
	tests := []struct {
		name  string
		root  string
		allow []string
		want  []string
	}{
		{"shortest chain first", "a", nil, []string{"a", "b", "golang.org/x/tools/go/packages"}},
		{"allowed prefix skipped", "a", []string{"golang.org/x/tools"}, []string{"a", "c", "d", "github.com/jackc/pgx/v5"}},
		{"everything allowed", "a", []string{"golang.org/x/tools", "github.com/jackc/pgx"}, nil},
		{"prefix is a path element", "e", []string{"github.com/alicebob/miniredis"}, nil},
		{"miniredis refused outside the test kit", "e", nil, []string{"e", "github.com/alicebob/miniredis/v2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := heavyChain(graph, tt.root, tt.allow); !slices.Equal(got, tt.want) {
				t.Errorf("heavyChain(%s) = %q, want %q", tt.root, got, tt.want)
			}
		})
	}
}

// listGraph runs go list with args, each output line a package and its
// imports, and returns the import graph.
func listGraph(t *testing.T, args ...string) map[string][]string {
	t.Helper()
	var stderr bytes.Buffer
	cmd := exec.Command("go", args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	graph := map[string][]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) > 0 {
			graph[f[0]] = f[1:]
		}
	}
	return graph
}

// heavyChain is the shortest import chain from root to a package in
// heavy and not in allow, root first, or nil if there is none.
func heavyChain(graph map[string][]string, root string, allow []string) []string {
	prev := map[string]string{root: ""}
	queue := []string{root}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if under(p, heavy) && !under(p, allow) {
			var chain []string
			for q := p; q != ""; q = prev[q] {
				chain = append(chain, q)
			}
			slices.Reverse(chain)
			return chain
		}
		for _, imp := range graph[p] {
			if _, seen := prev[imp]; !seen {
				prev[imp] = p
				queue = append(queue, imp)
			}
		}
	}
	return nil
}

// under reports whether package path p is one of prefixes or below one.
func under(p string, prefixes []string) bool {
	for _, pre := range prefixes {
		if p == pre || strings.HasPrefix(p, pre+"/") {
			return true
		}
	}
	return false
}
