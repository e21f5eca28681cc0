package generator

import (
	"fmt"
	"go/token"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Error is one refused inconsistency, at the offending marker or
// declaration, with related positions beneath it.
type Error struct {
	Pos     token.Position
	Msg     string
	Related []Related
}

// Related is a secondary position of an Error.
type Related struct {
	Pos token.Position
	Msg string
}

func (e *Error) Error() string { return e.Format("") }

// Format renders the error as "path:line:col: message", with each related
// position on a tab-indented line beneath; paths are made relative to dir
// when dir is not empty.
func (e *Error) Format(dir string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s", posString(e.Pos, dir), e.Msg)
	for _, r := range e.Related {
		fmt.Fprintf(&b, "\n\t%s: %s", posString(r.Pos, dir), r.Msg)
	}
	return b.String()
}

func posString(p token.Position, dir string) string {
	name := p.Filename
	if dir != "" {
		if rel, err := filepath.Rel(dir, name); err == nil {
			name = rel
		}
	}
	if p.Column == 0 {
		return fmt.Sprintf("%s:%d", name, p.Line)
	}
	return fmt.Sprintf("%s:%d:%d", name, p.Line, p.Column)
}

// Errors is every error of one run, sorted by position. seqgen writes
// nothing when there is any.
type Errors []*Error

func (es Errors) Error() string { return es.Format("") }

// Format renders one error per line (related positions indented beneath).
func (es Errors) Format(dir string) string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Format(dir)
	}
	return strings.Join(lines, "\n")
}

func (es Errors) sort() {
	sort.SliceStable(es, func(i, j int) bool {
		if c := comparePositions(es[i].Pos, es[j].Pos); c != 0 {
			return c < 0
		}
		return es[i].Msg < es[j].Msg
	})
}

// LoadError reports that packages could not be listed or parsed: syntax
// errors, missing packages, patterns that match nothing. The command exits
// 2 on it; type errors never cause it. Errs holds each error once, sorted,
// those with a position first; an error without one has a zero Pos.
type LoadError struct {
	Errs Errors
}

func (e *LoadError) Error() string { return e.Format("") }

// Format renders each positioned error as "path:line:col: message" like
// every other seqgen error (paths relative to dir when dir is not empty),
// and each error without a position as "seqgen: cannot load packages: ...".
func (e *LoadError) Format(dir string) string {
	lines := make([]string, len(e.Errs))
	for i, err := range e.Errs {
		if err.Pos.Filename == "" {
			lines[i] = "seqgen: cannot load packages: " + err.Msg
		} else {
			lines[i] = err.Format(dir)
		}
	}
	return strings.Join(lines, "\n")
}

// newLoadError builds a LoadError from messages in the go command's
// "path:line:col: message" form or without a position, resolving relative
// paths against dir. Like go build it keeps the first error of each source
// line (the leftmost; of those at one column, the first given): a syntax
// error sets off more errors on its line ("expected ')', found 'EOF'"
// beside "missing ',' in parameter list") that tell nothing more, and the
// go command, go/packages' parser and each package that imports the broken
// one all report it again. Errors without a position are kept once each.
func newLoadError(dir string, msgs ...string) *LoadError {
	le := &LoadError{}
	seen := map[string]bool{}
	for _, m := range msgs {
		pos, msg := splitPosition(unwrap(m))
		// The go command continues some messages on indented lines ("to
		// add it:\n\tgo get ..."); keep one error on one line.
		msg = strings.Join(strings.Fields(msg), " ")
		if pos.Filename != "" && !filepath.IsAbs(pos.Filename) && dir != "" {
			pos.Filename = filepath.Join(dir, pos.Filename)
		}
		e := &Error{Pos: pos, Msg: msg}
		if key := e.Format(""); !seen[key] {
			seen[key] = true
			le.Errs = append(le.Errs, e)
		}
	}
	sort.SliceStable(le.Errs, func(i, j int) bool {
		a, b := le.Errs[i], le.Errs[j]
		if (a.Pos.Filename == "") != (b.Pos.Filename == "") {
			return b.Pos.Filename == ""
		}
		if c := comparePositions(a.Pos, b.Pos); c != 0 {
			return c < 0
		}
		// The first given of one position stays first; errors without
		// a position go by message.
		return a.Pos.Filename == "" && a.Msg < b.Msg
	})
	kept := le.Errs[:0]
	for _, e := range le.Errs {
		if n := len(kept); n > 0 && e.Pos.Filename != "" &&
			kept[n-1].Pos.Filename == e.Pos.Filename && kept[n-1].Pos.Line == e.Pos.Line {
			continue
		}
		kept = append(kept, e)
	}
	le.Errs = kept
	return le
}

// splitPosition splits "path.go:line:col: message" (or "path.go:line:
// message") into a position and a message; other text has no position.
func splitPosition(s string) (token.Position, string) {
	head, msg, ok := strings.Cut(s, ": ")
	if !ok {
		return token.Position{}, s
	}
	parts := strings.Split(head, ":")
	// A Windows path has a drive letter's colon too, so count from the end.
	var nums []int
	for len(parts) > 1 && len(nums) < 2 {
		n, err := strconv.Atoi(parts[len(parts)-1])
		if err != nil {
			break
		}
		nums = append([]int{n}, nums...)
		parts = parts[:len(parts)-1]
	}
	file := strings.Join(parts, ":")
	if base := filepath.Base(file); len(nums) == 0 || !(strings.HasSuffix(file, ".go") || base == "go.mod" || base == "go.work") {
		return token.Position{}, s
	}
	pos := token.Position{Filename: file, Line: nums[0]}
	if len(nums) == 2 {
		pos.Column = nums[1]
	}
	return pos, msg
}

func comparePositions(a, b token.Position) int {
	switch {
	case a.Filename != b.Filename:
		return strings.Compare(a.Filename, b.Filename)
	case a.Line != b.Line:
		return a.Line - b.Line
	}
	return a.Column - b.Column
}

// unwrap takes the go command's own message out of go/packages' wrapper
// ("err: exit status 1: stderr: go: errors parsing go.mod:\n<the
// positioned line>"): the positioned line when there is one, else the
// message without the wrapper.
func unwrap(m string) string {
	rest, ok := strings.CutPrefix(m, "err: ")
	if !ok {
		return m
	}
	if _, after, found := strings.Cut(rest, "stderr: "); found {
		rest = after
	}
	for _, line := range strings.Split(rest, "\n") {
		if pos, _ := splitPosition(strings.TrimSpace(line)); pos.Filename != "" {
			return strings.TrimSpace(line)
		}
	}
	return strings.TrimSpace(rest)
}
