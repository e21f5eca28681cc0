package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"

	"github.com/seqby/seqby/annotations"
	"github.com/seqby/seqby/generator"
	"github.com/seqby/seqby/internal/version"
)

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("seqgen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	check := fs.Bool("check", false, "write nothing; print a diff of every stale, missing or obsolete "+generator.GenFile+" and exit 1 if there is any")
	printVersion := fs.Bool("version", false, "print seqgen's version and exit")
	// -h asked for the manual: stdout, exit 0. A wrong flag is an error:
	// the flag package's message and the usage go to stderr, exit 2.
	fs.Usage = func() {}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			usage(fs, stdout)
			return 0
		}
		usage(fs, stderr)
		return 2
	}
	if *printVersion {
		bi, _ := debug.ReadBuildInfo()
		fmt.Fprintln(stdout, version.Line("seqgen", bi))
		return 0
	}
	dir, err := os.Getwd()
	if err != nil {
		fmt.Fprintln(stderr, "seqgen:", err)
		return 2
	}
	res, err := generator.Generate(generator.Config{Dir: dir, Patterns: fs.Args()})
	var errs generator.Errors
	var lerr *generator.LoadError
	switch {
	case errors.As(err, &errs):
		fmt.Fprintln(stderr, errs.Format(dir))
		return 1
	case errors.As(err, &lerr):
		fmt.Fprintln(stderr, lerr.Format(dir))
		return 2
	case err != nil:
		fmt.Fprintln(stderr, err)
		return 2
	}
	if *check {
		d := res.Diff(dir)
		if len(d) == 0 {
			return 0
		}
		stdout.Write(d)
		fmt.Fprintf(stderr, "seqgen: %d generated file(s) out of date; run go generate ./...\n", len(res.Stale()))
		return 1
	}
	if err := res.Write(); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	return 0
}

func usage(fs *flag.FlagSet, w io.Writer) {
	fmt.Fprint(w, `usage: seqgen [flags] [packages]

seqgen reads //seqby: markers in the named packages (default ./...), refuses
every inconsistency with a path:line:col error, and writes `+generator.GenFile+` in
each package that has markers. Run it once per module, from its root:

	//go:generate go tool seqgen ./...

Flags:
`)
	fs.SetOutput(w)
	fs.PrintDefaults()
	fmt.Fprint(w, "\nMarkers (a line //seqby:NAME or //seqby:NAME=VALUE in a doc comment):\n")
	for _, d := range annotations.Defs {
		name := annotations.Prefix + d.Name
		if d.Arg != "" {
			name += "=" + d.Arg
		}
		fmt.Fprintf(w, "  %-28s %s\n", name, d.Help)
	}
	fmt.Fprint(w, `
FIELD is a direct field of the message struct, by JSON name, else Go name.
CATEGORY is non-empty, without ':', '{', '}' or white space, and not of the __name__ form.
NAME (a handler's consumer group; default import/path.Type) uses letters,
digits and '.', '_', '-', '/', and starts with a letter or digit.
Markers in _test.go files and comments such as "// seqby:key=x" are refused, as
are markers and handle methods in files with build constraints (//go:build,
_GOOS/_GOARCH file names, cgo): seqby_gen.go is built on every platform.

Exit status: 0 ok; 1 inconsistent markers or (with -check) stale files; 2 load or flag errors
(syntax errors and missing packages print as path:line:col: message, each once,
the first error of a line only, as go build prints them).
`)
}
