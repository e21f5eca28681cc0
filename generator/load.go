package generator

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/tools/go/packages"
)

// GenFile is the name of the file seqgen writes in each package.
const GenFile = "seqby_gen.go"

// loaded is the outcome of loading: the packages files are generated for
// (roots) and the other packages of the module whose markers are read
// (deps), type-checked together so their types are shared.
type loaded struct {
	fset   *token.FileSet
	roots  []*packages.Package
	deps   []*packages.Package
	module string
	// existing maps a package path to the path of its seqby_gen.go, for
	// roots that have one.
	existing map[string]string
	// foreign lists files named seqby_gen.go that seqgen did not write.
	foreign []string
	// tests holds the _test.go files of the listed packages' directories,
	// parsed for their comments only: seqgen reads no markers there but
	// must not skip them in silence.
	tests []*ast.File
	// strays holds the files, parsed with comments, of directories a
	// pattern reaches that the go command listed no package for on this
	// platform: every file there has a build constraint that leaves it
	// out. Markers there are refused as in any constrained file, so
	// another platform, which lists the package, gives the same errors.
	strays []constrainedFile
}

const listMode = packages.NeedName | packages.NeedFiles | packages.NeedModule | packages.NeedImports

const fullMode = listMode | packages.NeedSyntax | packages.NeedTypes | packages.NeedTypesInfo

// load lists the packages matched by patterns and the module packages they
// import, then parses and type-checks them from source with every existing
// seqby_gen.go replaced by its package clause, so seqgen's own stale output
// cannot stand in its way. Type errors are tolerated: user code may already
// call methods seqgen has not written yet. The packages they import beyond
// those come from the export data the go command compiles (and caches), as
// on a first run: the replacement reaches the go command as its -overlay
// flag, which the compiler honours, and the parser through parseHiding.
// Given as Config.Overlay instead, it would make go/packages distrust all
// export data and type-check every dependency from source: on seqby
// itself, with 420 dependency packages, five times the time and
// twelve times the memory of a first run.
func load(dir string, env []string, patterns []string) (*loaded, error) {
	if dir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return nil, newLoadError("", err.Error())
		}
		dir = wd
	}
	overlay, removable, foreign := ownOutput(dir)
	cfg := &packages.Config{Mode: listMode, Dir: dir, Env: env, Tests: false}
	cleanup, err := hide(cfg, overlay, removable)
	if err != nil {
		return nil, newLoadError(dir, err.Error())
	}
	defer cleanup()
	hidden := len(overlay)
	roots, err := packages.Load(cfg, patterns...)
	if err != nil {
		return nil, newLoadError(dir, err.Error())
	}
	if msgs := listErrors(roots); len(msgs) > 0 {
		return nil, newLoadError(dir, msgs...)
	}
	if len(roots) == 0 {
		return nil, newLoadError(dir, "no packages match "+strings.Join(patterns, " "))
	}
	module, moduleDir := "", ""
	if m := roots[0].Module; m != nil {
		module, moduleDir = m.Path, m.Dir
	}
	isRoot := map[string]bool{}
	for _, p := range roots {
		isRoot[p.PkgPath] = true
	}
	var depPaths []string
	seen := map[string]bool{}
	for _, p := range roots {
		for path := range p.Imports {
			if !isRoot[path] && !seen[path] && inModule(module, path) {
				seen[path] = true
				depPaths = append(depPaths, path)
			}
		}
	}
	sort.Strings(depPaths)
	var listed []*packages.Package
	listed = append(listed, roots...)
	if len(depPaths) > 0 {
		deps, err := packages.Load(cfg, asPatterns(module, moduleDir, depPaths)...)
		if err != nil {
			return nil, newLoadError(dir, err.Error())
		}
		listed = append(listed, deps...)
	}

	// Output outside dir (a pattern reaching elsewhere) is found through
	// the listing instead.
	existing := map[string]string{}
	isForeign := map[string]bool{}
	for _, f := range foreign {
		isForeign[f] = true
	}
	for _, p := range listed {
		// A removed file is not listed: the go command takes it as absent.
		if f := filepath.Join(p.Dir, GenFile); removable[f] && isRoot[p.PkgPath] {
			existing[p.PkgPath] = f
		}
		for _, f := range append(append([]string{}, p.GoFiles...), p.IgnoredFiles...) {
			if filepath.Base(f) != GenFile {
				continue
			}
			if _, ok := overlay[f]; !ok && !isForeign[f] {
				if isOwnOutput(f) {
					overlay[f] = []byte("package " + p.Name + "\n")
				} else {
					isForeign[f] = true
					foreign = append(foreign, f)
				}
			}
			if isRoot[p.PkgPath] {
				existing[p.PkgPath] = f
			}
		}
	}

	// The listing's -overlay serves again unless the listing found more
	// output to hide.
	full := &packages.Config{Mode: fullMode, Dir: dir, Env: env, Fset: token.NewFileSet(), ParseFile: parseHiding(overlay),
		BuildFlags: cfg.BuildFlags, Overlay: cfg.Overlay}
	if len(overlay) != hidden {
		full.BuildFlags, full.Overlay = nil, nil
		cleanup, err := hide(full, overlay, removable)
		if err != nil {
			return nil, newLoadError(dir, err.Error())
		}
		defer cleanup()
	}
	all, err := packages.Load(full, asPatterns(module, moduleDir, append(rootPaths(roots), depPaths...))...)
	if err != nil {
		return nil, newLoadError(dir, err.Error())
	}
	if msgs := listErrors(all); len(msgs) > 0 {
		return nil, newLoadError(dir, msgs...)
	}
	ld := &loaded{fset: full.Fset, module: module, existing: existing}
	ld.tests = parseTestFiles(full.Fset, listed)
	ld.strays = strayFiles(full.Fset, dir, patterns, listed)
	for _, f := range foreign {
		for _, e := range existing {
			if e == f {
				ld.foreign = append(ld.foreign, f)
			}
		}
	}
	for _, p := range all {
		if isRoot[p.PkgPath] {
			ld.roots = append(ld.roots, p)
		} else {
			ld.deps = append(ld.deps, p)
		}
	}
	return ld, nil
}

// parseTestFiles parses the _test.go files in the directories of ps. A
// file that does not parse still yields the comments read before the error;
// the go command reports its syntax error when the tests are built.
func parseTestFiles(fset *token.FileSet, ps []*packages.Package) []*ast.File {
	seen := map[string]bool{}
	var out []*ast.File
	for _, p := range ps {
		if p.Dir == "" || seen[p.Dir] {
			continue
		}
		seen[p.Dir] = true
		names, _ := filepath.Glob(filepath.Join(p.Dir, "*_test.go"))
		for _, name := range names {
			if f, _ := parser.ParseFile(fset, name, nil, parser.ParseComments|parser.SkipObjectResolution); f != nil {
				out = append(out, f)
			}
		}
	}
	return out
}

func rootPaths(ps []*packages.Package) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.PkgPath
	}
	return out
}

// listErrors keeps the errors that stop seqgen: listing and parsing. Type
// errors do not, nor does the compiler output the go command reports as a
// list error ("# path\n..."), since each of its errors also comes as a
// TypeError or ParseError of its own.
func listErrors(ps []*packages.Package) []string {
	var msgs []string
	for _, p := range ps {
		for _, e := range p.Errors {
			if e.Kind == packages.TypeError || (e.Kind == packages.ListError && strings.HasPrefix(e.Msg, "# ")) {
				continue
			}
			// Errors without a position print as "-: msg"; drop the dash.
			// newLoadError splits the position off again.
			msgs = append(msgs, strings.TrimPrefix(e.Error(), "-: "))
		}
	}
	return msgs
}

// asPatterns turns import paths of the module into patterns for the go
// command. One that ends in ".go" (a module named like nats.go or main.go)
// would be read as a file name when such a file exists in the directory the
// go command runs in, so it is given as the package's directory instead.
func asPatterns(module, moduleDir string, paths []string) []string {
	out := make([]string, len(paths))
	for i, path := range paths {
		out[i] = path
		if strings.HasSuffix(path, ".go") && moduleDir != "" && inModule(module, path) {
			out[i] = filepath.Join(moduleDir, filepath.FromSlash(strings.TrimPrefix(path, module)))
		}
	}
	return out
}

func inModule(module, path string) bool {
	return module != "" && (path == module || strings.HasPrefix(path, module+"/"))
}

// sourceFiles pairs a package's syntax trees with their file names, leaving
// out seqgen's own output.
func sourceFiles(fset *token.FileSet, p *packages.Package) []*ast.File {
	var out []*ast.File
	for _, f := range p.Syntax {
		if filepath.Base(fset.File(f.Pos()).Name()) == GenFile {
			continue
		}
		out = append(out, f)
	}
	return out
}
