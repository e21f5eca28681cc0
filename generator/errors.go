package generator

import (
	"fmt"
	"go/token"
	"path/filepath"
	"sort"
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

// LoadError reports that packages could not be listed or parsed. The
// command exits 2 on it; type errors never cause it.
type LoadError struct {
	Msgs []string
}

func (e *LoadError) Error() string {
	return "seqgen: cannot load packages:\n\t" + strings.Join(e.Msgs, "\n\t")
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
