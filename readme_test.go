package seqby

import (
	"bytes"
	"fmt"
	"go/format"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/gotooltest"
	"github.com/rogpeppe/go-internal/testscript"

	"github.com/seqby/seqby/internal/redistest"
)

// The README's install-from-checkout and quick start are run by
// TestReadmeQuickStart, from the README's own text, so the two cannot
// drift. The test reads these blocks of README.md:
//
//   - A fenced block preceded (on the nearest non-blank line above it) by
//     an HTML comment <!-- readme-test: KIND ARGS -->, where KIND is
//     "sh DIR" (run the block with sh -e in DIR, relative to the
//     script's work directory), "go.mod DIR" (each blank-line-separated
//     group of the block's lines appears, contiguous, in DIR/go.mod) or
//     "stdout" (the output of the sh block before it has the block's
//     lines, and each key's lines, "KEY: ...", in the block's order; the
//     keys may interleave differently).
//   - A ```go block whose first line is "// file: PATH": a file of the
//     module, PATH relative to the directory of the go.mod block. It is
//     copied there before the next sh block runs.
//
// Three strings of the README are replaced, and each must occur: the
// checkout's path in the install commands ($HOME/src/seqby) and in the
// go.mod lines (/home/you/src/seqby) by this checkout's, and the Redis
// URL (redis://127.0.0.1:6379/0) by a private redis-server's.
const (
	readmeCheckoutInCommands = "$HOME/src/seqby"
	readmeCheckoutInGoMod    = "/home/you/src/seqby"
	readmeRedisURL           = "redis://127.0.0.1:6379/0"
	readmeMarker             = "<!-- readme-test:"
	readmeFileLine           = "// file: "
)

// mdBlock is one fenced code block of a Markdown file.
type mdBlock struct {
	line   int    // 1-based line of the opening fence
	info   string // the fence's info string ("go", "sh", "")
	marker string // the readme-test marker before it, without "<!-- readme-test:" and "-->"
	body   string // the lines between the fences, each ending in "\n"
}

// fencedBlocks returns the fenced code blocks of a Markdown text, with the
// readme-test marker that precedes each one, if any.
func fencedBlocks(t *testing.T, name, text string) []mdBlock {
	t.Helper()
	var blocks []mdBlock
	lines := strings.Split(text, "\n")
	lastNonBlank := ""
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if !strings.HasPrefix(l, "```") {
			if strings.TrimSpace(l) != "" {
				lastNonBlank = strings.TrimSpace(l)
			}
			continue
		}
		b := mdBlock{line: i + 1, info: strings.TrimSpace(strings.TrimPrefix(l, "```"))}
		if strings.HasPrefix(lastNonBlank, readmeMarker) && strings.HasSuffix(lastNonBlank, "-->") {
			b.marker = strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(lastNonBlank, readmeMarker), "-->"))
		}
		var body strings.Builder
		closed := false
		for i++; i < len(lines); i++ {
			if strings.HasPrefix(lines[i], "```") {
				closed = true
				break
			}
			body.WriteString(lines[i] + "\n")
		}
		if !closed {
			t.Fatalf("%s:%d: fenced block is not closed", name, b.line)
		}
		b.body = body.String()
		blocks = append(blocks, b)
		lastNonBlank = "```"
	}
	return blocks
}

// goFilePath returns the PATH of a "// file: PATH" Go block, or "".
func goFilePath(b mdBlock) string {
	if b.info != "go" {
		return ""
	}
	first, _, _ := strings.Cut(b.body, "\n")
	if !strings.HasPrefix(first, readmeFileLine) {
		return ""
	}
	return strings.TrimSpace(strings.TrimPrefix(first, readmeFileLine))
}

func readReadme(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestReadmeGoSnippets checks that every Go snippet of README.md is a file
// of the quick start (which TestReadmeQuickStart builds and runs), so none
// goes unchecked, and that each is gofmt-clean, as a user's editor would
// leave it.
func TestReadmeGoSnippets(t *testing.T) {
	blocks := fencedBlocks(t, "README.md", readReadme(t))
	files := 0
	for _, b := range blocks {
		if b.info != "go" {
			continue
		}
		p := goFilePath(b)
		if p == "" {
			t.Errorf("README.md:%d: a Go snippet that is not a file of the quick start (first line %q); make it one, or move it to a compiled Example", b.line, readmeFileLine+"PATH")
			continue
		}
		files++
		src, err := format.Source([]byte(b.body))
		if err != nil {
			t.Errorf("README.md:%d (%s): %v", b.line, p, err)
			continue
		}
		if !bytes.Equal(src, []byte(b.body)) {
			t.Errorf("README.md:%d (%s) is not gofmt-clean; gofmt gives:\n%s", b.line, p, src)
		}
	}
	if files == 0 {
		t.Fatalf("README.md has no %q Go files: the quick start is gone", readmeFileLine)
	}
}

// TestReadmeQuickStart performs the README's install from a local checkout
// and its quick start in a fresh module, offline (the module cache holds
// seqby's dependencies, as after go build ./... here), and runs the
// program against a private redis-server. Without redis-server it still
// installs, generates and builds, and skips the rest, saying so.
func TestReadmeQuickStart(t *testing.T) {
	root, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	modcache, err := exec.Command("go", "env", "GOMODCACHE").Output()
	if err != nil {
		t.Fatal(err)
	}
	_, noRedis := exec.LookPath("redis-server")
	redisURL := "redis://127.0.0.1:1/0" // never used: the script skips first
	if noRedis == nil {
		s := redistest.New(t)
		redisURL = "redis://" + s.Addr + "/0"
	}

	readme := readReadme(t)
	for _, s := range []string{readmeCheckoutInCommands, readmeCheckoutInGoMod, readmeRedisURL} {
		if !strings.Contains(readme, s) {
			t.Fatalf("README.md no longer contains %q, which this test replaces; update the test with the README", s)
		}
	}
	script := quickStartScript(t, readme, root, redisURL, noRedis)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "quickstart.txtar"), []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}

	p := testscript.Params{
		Dir: dir,
		Setup: func(env *testscript.Env) error {
			env.Setenv("GOMODCACHE", strings.TrimSpace(string(modcache)))
			env.Setenv("GOFLAGS", "-mod=mod")
			env.Setenv("GOPROXY", "off")
			env.Setenv("GOSUMDB", "off")
			env.Setenv("GOTOOLCHAIN", "local")
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"gomodhas": cmdGoModHas,
			"keyorder": cmdKeyOrder,
		},
		Deadline: time.Now().Add(5 * time.Minute),
	}
	if d, ok := t.Deadline(); ok {
		p.Deadline = d
	}
	if err := gotooltest.Setup(&p); err != nil {
		t.Fatal(err)
	}
	testscript.Run(t, p)
}

// quickStartScript turns the README's marked blocks into a testscript
// that runs them in README order, with the blocks as the archive's files.
// Without redis-server, the first sh block that needs Redis is replaced by
// go build ./... (what go run would compile) and a skip.
func quickStartScript(t *testing.T, readme, root, redisURL string, noRedis error) string {
	t.Helper()
	var files, cmds strings.Builder
	modDir := ""         // the module's directory, from the go.mod block
	var pending []string // Go files to copy before the next sh block
	skipped := false
	n := 0
	lastWasSh := false
	for _, b := range fencedBlocks(t, "README.md", readme) {
		kind, arg, _ := strings.Cut(b.marker, " ")
		if p := goFilePath(b); p != "" {
			if b.marker != "" {
				t.Fatalf("README.md:%d: a Go file block takes no readme-test marker", b.line)
			}
			fmt.Fprintf(&files, "-- files/%s --\n%s", p, b.body)
			pending = append(pending, p)
			continue
		}
		if b.marker == "" {
			continue
		}
		n++
		fmt.Fprintf(&cmds, "\n# README.md:%d: %s\n", b.line, b.marker)
		switch kind {
		case "sh":
			if modDir == "" && len(pending) > 0 {
				t.Fatalf("README.md:%d: Go files come before the go.mod block that names their module's directory", b.line)
			}
			for _, p := range pending {
				dst := path.Join(modDir, p)
				fmt.Fprintf(&cmds, "mkdir $WORK/%s\ncp files/%s $WORK/%s\n", path.Dir(dst), p, dst)
			}
			pending = nil
			body := strings.ReplaceAll(b.body, readmeCheckoutInCommands, root)
			if strings.Contains(body, readmeRedisURL) {
				if noRedis != nil && !skipped {
					fmt.Fprintf(&cmds, "cd $WORK/%s\nexec go build ./...\n", arg)
					fmt.Fprintf(&cmds, "skip 'redis-server is not on PATH, so the quick start was installed, generated and built but not run (make test installs redis-server)'\n")
					skipped = true
				}
				body = strings.ReplaceAll(body, readmeRedisURL, redisURL)
			}
			fmt.Fprintf(&files, "-- block%d.sh --\n%s", n, body)
			fmt.Fprintf(&cmds, "cd $WORK/%s\nexec sh -e $WORK/block%d.sh\ncd $WORK\n", arg, n)
			lastWasSh = true
			continue
		case "go.mod":
			modDir = arg
			fmt.Fprintf(&files, "-- block%d.gomod --\n%s", n, strings.ReplaceAll(b.body, readmeCheckoutInGoMod, root))
			fmt.Fprintf(&cmds, "gomodhas %s/go.mod block%d.gomod\n", arg, n)
		case "stdout":
			if !lastWasSh {
				t.Fatalf("README.md:%d: a stdout block follows no sh block", b.line)
			}
			fmt.Fprintf(&files, "-- block%d.stdout --\n%s", n, b.body)
			fmt.Fprintf(&cmds, "keyorder block%d.stdout\n", n)
		default:
			t.Fatalf("README.md:%d: unknown readme-test marker %q (want sh DIR, go.mod DIR or stdout)", b.line, b.marker)
		}
		lastWasSh = false
	}
	if len(pending) > 0 {
		t.Fatalf("README.md: Go files %v are followed by no sh block that would build them", pending)
	}
	if !skipped && noRedis != nil {
		t.Fatalf("README.md: no sh block uses %s, so nothing runs the program", readmeRedisURL)
	}
	// The script comes first in a txtar archive, the files after it.
	return "# Generated from README.md by TestReadmeQuickStart.\n" + cmds.String() + files.String()
}

// cmdGoModHas checks that each blank-line-separated group of lines of the
// second file appears, contiguous, in the first (a go.mod).
func cmdGoModHas(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: gomodhas GOMOD EXPECTED")
	}
	got := "\n" + ts.ReadFile(args[0]) + "\n"
	for _, group := range strings.Split(strings.TrimSpace(ts.ReadFile(args[1])), "\n\n") {
		if !strings.Contains(got, "\n"+group+"\n") {
			ts.Fatalf("%s lacks the README's lines\n%s\nit reads:\n%s", args[0], group, got)
		}
	}
}

// cmdKeyOrder checks the last command's stdout against the README's
// expected output: the same lines, and each key's ("KEY: ...") in the same
// order; different keys may interleave differently.
func cmdKeyOrder(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: keyorder EXPECTED")
	}
	perKey := func(text string) (map[string][]string, []string) {
		m := map[string][]string{}
		var all []string
		for _, l := range strings.Split(strings.TrimSpace(text), "\n") {
			key, _, ok := strings.Cut(l, ": ")
			if !ok {
				ts.Fatalf("line %q is not KEY: ...", l)
			}
			m[key] = append(m[key], l)
			all = append(all, l)
		}
		return m, all
	}
	gotText := ts.ReadFile("stdout")
	got, gotAll := perKey(gotText)
	want, wantAll := perKey(ts.ReadFile(args[0]))
	slices.Sort(gotAll)
	slices.Sort(wantAll)
	if !slices.Equal(gotAll, wantAll) {
		ts.Fatalf("the program printed\n%s\nthe README shows\n%s", gotText, ts.ReadFile(args[0]))
	}
	for key, lines := range want {
		if !slices.Equal(got[key], lines) {
			ts.Fatalf("key %s: the program printed %q; the README shows %q, in that order", key, got[key], lines)
		}
	}
}
