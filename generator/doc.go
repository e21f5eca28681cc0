// Package generator is seqgen's engine: load → scan → check → emit, kept
// apart so each step can be read on its own.
//
//   - load (load.go) lists the matched packages and the module packages they
//     import, then parses and type-checks them together, with every existing
//     seqby_gen.go replaced by its package clause: seqgen's own stale output
//     never stands in its way, and type errors are tolerated because user
//     code may already call methods seqgen has not written yet. The
//     _test.go files of the same directories are parsed for their comments
//     only, so markers there are refused rather than skipped. Errors that
//     stop loading (syntax, missing packages) come back as a LoadError with
//     positions, each once.
//   - scan (scan.go) reads the //seqby: markers of every declaration
//     (package annotations parses and validates each declaration's set) into
//     a model of messages, handlers and handle methods (the method set of
//     *T, promoted methods included), and refuses near misses of markers
//     in doc comments.
//   - check (check.go, fields.go) resolves key and correlate fields with
//     encoding/json's visibility rules and enforces the rules that span
//     declarations: one key per category, every message of a partitioned
//     category carries it, sequential pms partition by their correlate
//     fields. Every problem is collected with its position and related
//     positions; a run with any writes nothing.
//   - emit (emit.go) writes one seqby_gen.go per package with jennifer.
//
// Generate returns every file in memory (Result), so writing, -check and
// diffs share one path.
package generator
