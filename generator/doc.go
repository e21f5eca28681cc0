// Package generator is seqgen's engine: load → scan → check → emit, kept
// apart so each step can be read on its own.
//
//   - load (load.go) lists the matched packages and the module packages they
//     import, then parses and type-checks them together, with every existing
//     seqby_gen.go replaced by its package clause: seqgen's own stale output
//     never stands in its way, and type errors are tolerated because user
//     code may already call methods seqgen has not written yet. The
//     _test.go files of the same directories are parsed for their comments
//     only, so markers there are refused rather than skipped. The packages
//     they import beyond those come from export data: the old output is
//     hidden from the go command with its own -overlay flag (overlay.go),
//     which keeps the build cache usable, where go/packages' Overlay would
//     type-check every dependency from source. Errors that stop loading
//     (syntax, missing packages) come back as a LoadError with positions,
//     only the first of each source line, as go build prints them. Packages whose import path ends in ".go" are
//     listed by directory, which the go command cannot take for a file.
//   - constraint.go finds the files of each package that have a build
//     constraint (//go:build, // +build, GOOS/GOARCH file names, cgo), both
//     those built on this platform and those left out, read from the files
//     themselves so that every platform sees the same; seqby_gen.go has no
//     constraint, so scan refuses markers and handle methods there and
//     check refuses key and correlate types declared there.
//   - scan (scan.go) reads the //seqby: markers of every declaration
//     (package annotations parses and validates each declaration's set) into
//     a model of messages, handlers and handle methods (the method set of
//     *T, promoted methods included), and refuses near misses of markers
//     in doc comments. A marked alias of another package's type declares
//     that type a message (types you do not own); the model keys messages
//     by the aliased type, so handle methods find it under either name. A
//     marked alias of a type of its own package (beside a .pb.go) declares
//     that type as if the markers stood on it.
//   - check (check.go, fields.go) resolves key and correlate fields with
//     encoding/json's visibility rules and enforces the rules that span
//     declarations: one key per category, every message of a partitioned
//     category carries it, sequential pms partition by their correlate
//     fields. promote.go walks Go's promotion rules with the methods seqgen
//     is about to write counted as declared, so that no message gets both
//     PartitionKey and SeqbyUnpartitioned through an embedded field. Every
//     problem is collected with its position and related positions; a run
//     with any writes nothing.
//   - emit (emit.go) writes one seqby_gen.go per package with jennifer.
//     Predeclared identifiers the package declares for itself (a func new,
//     a type string) are named through package annotations/universe;
//     messages holding a lock (nocopy.go) get methods on *M and are moved
//     as *M, so go vet's copylocks check is clean. An aliased type gets no
//     methods (it is another package's) but a function Seqby<Alias>
//     returning runtime.Foreign, and registrations read its key inline.
//
// Generate returns every file in memory (Result), so writing, -check and
// diffs share one path.
package generator
