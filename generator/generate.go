package generator

import (
	"bytes"
	"errors"
	"fmt"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"

	"github.com/rogpeppe/go-internal/diff"
)

// Config says what to generate.
type Config struct {
	// Dir is the directory patterns are resolved in ("" for the current one).
	Dir string
	// Env is the environment of the go command (nil for os.Environ()).
	Env []string
	// Patterns are package patterns; none means "./...".
	Patterns []string
}

// File is one generated file as it is on disk and as seqgen would write it.
type File struct {
	Path string // absolute path of a seqby_gen.go
	Old  []byte // current content; nil when the file does not exist
	New  []byte // wanted content; nil when the file must be removed
}

// Stale reports whether the file on disk differs from what seqgen writes.
func (f File) Stale() bool {
	if (f.Old == nil) != (f.New == nil) {
		return true
	}
	return !bytes.Equal(f.Old, f.New)
}

// Result holds every file seqgen owns in the loaded packages, in memory:
// writing, -check and diffs all start from it.
type Result struct {
	Files []File
}

// Generate loads, checks and emits. It returns *LoadError when packages
// cannot be listed or parsed and Errors when the markers are inconsistent;
// then nothing is to be written.
func Generate(cfg Config) (*Result, error) {
	patterns := cfg.Patterns
	if len(patterns) == 0 {
		patterns = []string{"./..."}
	}
	ld, err := load(cfg.Dir, cfg.Env, patterns)
	if err != nil {
		return nil, err
	}
	probs := &problems{fset: ld.fset}
	for _, f := range ld.foreign {
		probs.errs = append(probs.errs, &Error{Pos: token.Position{Filename: f, Line: 1, Column: 1},
			Msg: GenFile + " was not written by seqgen (it lacks the \"// " + header + "\" header); seqgen owns this file name, so rename the file"})
	}
	m := scan(ld, probs)
	pl := check(m, probs)
	if len(probs.errs) > 0 {
		probs.errs.sort()
		return nil, probs.errs
	}
	res := &Result{}
	for _, p := range ld.roots {
		content, err := emit(p, m, pl)
		if err != nil {
			return nil, err
		}
		path, exists := ld.existing[p.PkgPath]
		if !exists {
			if content == nil || len(p.GoFiles) == 0 {
				continue
			}
			path = filepath.Join(filepath.Dir(p.GoFiles[0]), GenFile)
		}
		old, err := os.ReadFile(path)
		if errors.Is(err, fs.ErrNotExist) {
			old = nil
		} else if err != nil {
			return nil, fmt.Errorf("seqgen: %w", err)
		}
		res.Files = append(res.Files, File{Path: path, Old: old, New: content})
	}
	sort.Slice(res.Files, func(i, j int) bool { return res.Files[i].Path < res.Files[j].Path })
	return res, nil
}

// Stale lists the files that differ from what seqgen writes.
func (r *Result) Stale() []File {
	var out []File
	for _, f := range r.Files {
		if f.Stale() {
			out = append(out, f)
		}
	}
	return out
}

// Write brings the stale files up to date: writes new content and removes
// generated files of packages that no longer have markers.
func (r *Result) Write() error {
	for _, f := range r.Stale() {
		if f.New == nil {
			if err := os.Remove(f.Path); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("seqgen: removing stale %s: %w", f.Path, err)
			}
			continue
		}
		if err := os.WriteFile(f.Path, f.New, 0o666); err != nil {
			return fmt.Errorf("seqgen: %w", err)
		}
	}
	return nil
}

// Diff renders a unified diff of every stale file, paths relative to dir.
func (r *Result) Diff(dir string) []byte {
	var buf bytes.Buffer
	for _, f := range r.Stale() {
		name := f.Path
		if dir != "" {
			if rel, err := filepath.Rel(dir, name); err == nil {
				name = rel
			}
		}
		oldName, newName := name, name
		if f.Old == nil {
			oldName = "/dev/null"
		}
		if f.New == nil {
			newName = "/dev/null"
		}
		buf.Write(diff.Diff(oldName, f.Old, newName, f.New))
	}
	return buf.Bytes()
}
