// Command seqgen checks //seqby: markers and writes typed key extractors and
// registration tables (seqby_gen.go) for seqby's per-key sequential engine.
//
// Usage:
//
//	seqgen [-check] [-version] [packages]
//
// Packages default to ./... and the tool is meant to run once per module,
// from its root, since some checks need every handler of a category in view:
//
//	//go:generate go tool seqgen ./...
//
// Exit status: 0 on success (with -check: up to date), 1 when markers are
// inconsistent (or, with -check, when a generated file is stale), 2 when
// packages cannot be loaded or the flags are wrong.
//
// The marker grammar is documented in package
// github.com/seqby/seqby/annotations and by seqgen -h.
package main

import "os"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}
