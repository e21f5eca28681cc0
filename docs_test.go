package seqby

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// docFiles are the Markdown files whose links TestDocLinks checks.
func docFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{"README.md"}, files...)
}

// mdLink matches an inline Markdown link, [text](target). The text may
// hold code spans but no brackets.
var mdLink = regexp.MustCompile(`\[[^\[\]]*\]\(([^()\s]*)\)`)

// codeSpan matches an inline code span, whose brackets are not links.
var codeSpan = regexp.MustCompile("`[^`]*`")

// mdLinks returns the link targets of a Markdown text, outside fenced
// blocks and code spans, with the line of each.
func mdLinks(text string) (targets []string, lines []int) {
	fenced := false
	for i, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		// A code span's text is blanked; a link's text may hold one.
		l = codeSpan.ReplaceAllStringFunc(l, func(s string) string { return strings.Repeat("x", len(s)) })
		for _, m := range mdLink.FindAllStringSubmatch(l, -1) {
			targets = append(targets, m[1])
			lines = append(lines, i+1)
		}
	}
	return targets, lines
}

// headingAnchors returns the anchors GitHub gives the headings of a
// Markdown text: the heading's text in lower case, without punctuation
// (anything but letters, digits, spaces, '-' and '_'), spaces made '-',
// and "-1", "-2" ... added to repeats.
func headingAnchors(text string) map[string]bool {
	anchors := map[string]bool{}
	seen := map[string]int{}
	fenced := false
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			fenced = !fenced
			continue
		}
		if fenced || !strings.HasPrefix(l, "#") {
			continue
		}
		h := strings.TrimSpace(strings.TrimLeft(l, "#"))
		if h == "" || len(l)-len(strings.TrimLeft(l, "#")) > 6 {
			continue
		}
		a := slug(h)
		if n := seen[a]; n > 0 {
			anchors[a+"-"+strconv.Itoa(n)] = true
		} else {
			anchors[a] = true
		}
		seen[a]++
	}
	return anchors
}

// slug is GitHub's anchor for a heading's text.
func slug(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// TestDocLinks checks every relative link of README.md and docs/*.md: the file or directory exists inside the repository, and a
// #fragment names a heading of the target Markdown file (or of the file
// itself), by GitHub's anchor rules. Links to the web are not fetched.
func TestDocLinks(t *testing.T) {
	root, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	anchorsOf := map[string]map[string]bool{}
	anchors := func(file string) map[string]bool {
		if a, ok := anchorsOf[file]; ok {
			return a
		}
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		anchorsOf[file] = headingAnchors(string(b))
		return anchorsOf[file]
	}
	checked := 0
	for _, file := range docFiles(t) {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		targets, lines := mdLinks(string(b))
		for i, target := range targets {
			where := file + ":" + strconv.Itoa(lines[i])
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			checked++
			p, frag, _ := strings.Cut(target, "#")
			dst := file
			if p != "" {
				dst = filepath.Join(filepath.Dir(file), filepath.FromSlash(p))
				abs, err := filepath.Abs(dst)
				if err != nil {
					t.Fatal(err)
				}
				if rel, err := filepath.Rel(root, abs); err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
					t.Errorf("%s: link %q leaves the repository", where, target)
					continue
				}
				if _, err := os.Stat(dst); err != nil {
					t.Errorf("%s: link %q: %s does not exist", where, target, dst)
					continue
				}
			}
			if frag == "" {
				continue
			}
			if !strings.HasSuffix(dst, ".md") {
				t.Errorf("%s: link %q has a #fragment on a file that is not Markdown", where, target)
				continue
			}
			if !anchors(dst)[frag] {
				t.Errorf("%s: link %q: %s has no heading with the anchor #%s", where, target, dst, frag)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no relative links found: the link pattern is broken")
	}
}

// TestSlug pins the anchor rules TestDocLinks relies on to GitHub's, on
// headings of these docs.
func TestSlug(t *testing.T) {
	for _, c := range []struct{ heading, want string }{
		{"Quick start", "quick-start"},
		{"seqbyctl: halted partitions and dead letters", "seqbyctl-halted-partitions-and-dead-letters"},
		{"Options (zero value = default)", "options-zero-value--default"},
		{"Status, halts and the lease in a handler", "status-halts-and-the-lease-in-a-handler"},
		{"Several relays: one active relay through a lease", "several-relays-one-active-relay-through-a-lease"},
		{"2026-12-01, at commit 58b9bce: seqgen on a 500-event module (issue #14)", "2026-12-01-at-commit-58b9bce-seqgen-on-a-500-event-module-issue-14"},
		{"The `go:generate` line", "the-gogenerate-line"},
		{"snake_case names", "snake_case-names"},
	} {
		if got := slug(c.heading); got != c.want {
			t.Errorf("slug(%q) = %q, want %q", c.heading, got, c.want)
		}
	}
}
