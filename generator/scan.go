package generator

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/seqby/seqby/annotations"
	"golang.org/x/tools/go/packages"
)

// scanner reads markers from syntax into a model, collecting problems.
type scanner struct {
	fset  *token.FileSet
	probs *problems
	m     *model
	// methodMarkers holds the valid markers of each method declaration,
	// by the position of the method's name (types.Func.Pos()).
	methodMarkers map[token.Pos]annotations.Set
	// consumed records the methods some handler's method set reached: a
	// method promoted into two handlers is read by both.
	consumed map[token.Pos]bool
	// refusedPM records pm handle methods already refused for their
	// receiver, so a method promoted into two pms is reported once.
	refusedPM map[token.Pos]bool
	// refusedNear records methods refused as near misses of a handle
	// method, so a method promoted into two handlers is reported once.
	refusedNear map[token.Pos]bool
	// refusedTypes holds the types ("path.Name") whose role marker was
	// refused at the declaration (a generic type, a bad category, a
	// handler on an interface): their methods and the handle methods that
	// take them give no second error.
	refusedTypes map[string]string // the role it was meant to have
	// methodRecv is the receiver type ("path.Name") of each method with
	// markers, by the position of its name.
	methodRecv map[token.Pos]string
	// constrained maps the files with a build constraint to its
	// description (see constraint.go); cfiles holds them parsed, by package.
	constrained map[string]string
	cfiles      map[*packages.Package][]constrainedFile
	// tests holds the _test.go files, parsed for their comments.
	tests []*ast.File
	// modules holds the paths of the modules of the root packages, to
	// tell a type the user owns from one they would declare by alias.
	modules map[string]bool
}

func scan(ld *loaded, probs *problems) *model {
	s := &scanner{
		fset:          ld.fset,
		probs:         probs,
		m:             &model{msgs: map[string]*message{}, byCategory: map[string][]*message{}},
		methodMarkers: map[token.Pos]annotations.Set{},
		consumed:      map[token.Pos]bool{},
		refusedPM:     map[token.Pos]bool{},
		refusedNear:   map[token.Pos]bool{},
		refusedTypes:  map[string]string{},
		methodRecv:    map[token.Pos]string{},
		constrained:   map[string]string{},
		cfiles:        map[*packages.Package][]constrainedFile{},
		modules:       map[string]bool{},
		tests:         ld.tests,
	}
	for _, p := range ld.roots {
		if p.Module != nil {
			s.modules[p.Module.Path] = true
		}
	}
	for _, p := range append(append([]*packages.Package{}, ld.roots...), ld.deps...) {
		for _, cf := range constrainedFiles(ld.fset, p) {
			s.constrained[cf.path] = cf.why
			s.cfiles[p] = append(s.cfiles[p], cf)
		}
	}
	for _, p := range ld.roots {
		s.pkg(p, true)
	}
	for _, p := range ld.deps {
		s.pkg(p, false)
	}
	s.testFiles(ld.tests)
	s.m.constrained = s.constrained
	s.constrainedMarkers(ld)
	for _, h := range s.m.handlers {
		s.handleMethods(h)
	}
	s.constrainedMethods(ld)
	s.strayCorrelates()
	for _, msg := range s.m.msgs {
		s.m.byCategory[msg.category] = append(s.m.byCategory[msg.category], msg)
	}
	for _, ms := range s.m.byCategory {
		sort.Slice(ms, func(i, j int) bool { return ms[i].qualified() < ms[j].qualified() })
	}
	sort.Slice(s.m.handlers, func(i, j int) bool { return s.m.handlers[i].qualified() < s.m.handlers[j].qualified() })
	return s.m
}

// markersOf parses the marker lines of a doc comment, marking them used.
func (s *scanner) markersOf(doc *ast.CommentGroup, used map[*ast.Comment]bool) []annotations.Found {
	if doc == nil {
		return nil
	}
	var out []annotations.Found
	for _, c := range doc.List {
		mk, ok, err := annotations.Parse(c.Text)
		if !ok {
			continue
		}
		used[c] = true
		if err != nil {
			s.probs.add(c.Pos(), "%v", err)
			continue
		}
		out = append(out, annotations.Found{Marker: mk, Pos: c.Pos()})
	}
	return out
}

func (s *scanner) check(target annotations.Target, found []annotations.Found) annotations.Set {
	set, probs := annotations.Check(target, found)
	for _, p := range probs {
		var rel []related
		for _, r := range p.Related {
			rel = append(rel, related{r.Pos, r.Msg})
		}
		s.probs.addRelated(p.Pos, p.Msg, rel...)
	}
	return set
}

func (s *scanner) pkg(p *packages.Package, root bool) {
	for _, f := range sourceFiles(s.fset, p) {
		if s.isConstrained(f.Package) {
			continue // constrainedMarkers reads it
		}
		used := map[*ast.Comment]bool{}
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.GenDecl:
				s.genDecl(p, root, d, used)
			case *ast.FuncDecl:
				found := s.markersOf(d.Doc, used)
				if d.Recv == nil {
					s.check(annotations.Func, found)
					continue
				}
				if set := s.check(annotations.Method, found); len(set) > 0 {
					s.methodMarkers[d.Name.Pos()] = set
					s.methodRecv[d.Name.Pos()] = p.PkgPath + "." + recvBase(d.Recv.List[0].Type)
				}
			}
		}
		// A marker anywhere else (a field, a variable, a floating comment)
		// would be silently ignored; say so instead.
		for _, g := range f.Comments {
			for _, c := range g.List {
				if used[c] || !annotations.IsMarker(c.Text) {
					continue
				}
				s.probs.add(c.Pos(), "marker %s is not in the doc comment of a type or method declaration; markers go directly above \"type T ...\" or a method", c.Text)
			}
		}
		s.nearMisses(f)
	}
}

// nearMisses refuses comments written almost like markers ("// seqby:key=x",
// "/* seqby:key=x */", "//SEQBY:key=x") in the doc comments of the file,
// its declarations and type specs: Go reads them as prose, so the marker
// their author meant would be ignored in silence. Comments inside function
// bodies and trailing comments are prose and are left alone.
func (s *scanner) nearMisses(f *ast.File) {
	for _, g := range docGroups(f) {
		for _, c := range g.List {
			if want, why, ok := annotations.NearMiss(c.Text); ok {
				s.probs.add(c.Pos(), "comment %q is not read as a marker: %s; write %s", c.Text, why, want)
			}
		}
	}
}

// docGroups lists the doc comments of a file: the package's, every top-level
// declaration's and every type or value spec's.
func docGroups(f *ast.File) []*ast.CommentGroup {
	groups := []*ast.CommentGroup{f.Doc}
	for _, decl := range f.Decls {
		switch d := decl.(type) {
		case *ast.FuncDecl:
			groups = append(groups, d.Doc)
		case *ast.GenDecl:
			groups = append(groups, d.Doc)
			for _, spec := range d.Specs {
				switch sp := spec.(type) {
				case *ast.TypeSpec:
					groups = append(groups, sp.Doc)
				case *ast.ValueSpec:
					groups = append(groups, sp.Doc)
				}
			}
		}
	}
	var out []*ast.CommentGroup
	for _, g := range groups {
		if g != nil {
			out = append(out, g)
		}
	}
	return out
}

// testFiles refuses markers in _test.go files. seqgen loads packages
// without their tests (test-only types cannot be registered by the code it
// writes into seqby_gen.go), so a marker there, even a misspelt one, would
// otherwise pass unread.
func (s *scanner) testFiles(files []*ast.File) {
	for _, f := range files {
		for _, g := range f.Comments {
			for _, c := range g.List {
				if annotations.IsMarker(c.Text) {
					s.probs.add(c.Pos(), "marker %s is in a _test.go file, which seqgen does not read; declare marked types and methods in a non-test file", c.Text)
				}
			}
		}
		s.nearMisses(f)
	}
}

// isConstrained reports whether pos is in a file with a build constraint.
func (s *scanner) isConstrained(pos token.Pos) bool {
	if _, ok := s.constrained[s.fset.Position(pos).Filename]; ok {
		return true
	}
	_, ok := s.constrained[s.fset.File(pos).Name()]
	return ok
}

// constrainedMarkers refuses every marker in a file with a build
// constraint: seqby_gen.go has none, so it would name the marked type on
// platforms (or builds, such as CGO_ENABLED=0) that leave the file out.
func (s *scanner) constrainedMarkers(ld *loaded) {
	for _, p := range append(append([]*packages.Package{}, ld.roots...), ld.deps...) {
		for _, cf := range s.cfiles[p] {
			s.markersIn(cf)
			s.nearMisses(cf.file)
		}
	}
	for _, cf := range ld.strays {
		s.constrained[cf.path] = cf.why
		s.markersIn(cf)
		s.nearMisses(cf.file)
	}
}

func (s *scanner) markersIn(cf constrainedFile) {
	for _, g := range cf.file.Comments {
		for _, c := range g.List {
			if annotations.IsMarker(c.Text) {
				s.probs.add(c.Pos(), "marker %s is in a file with a build constraint (%s); seqby_gen.go has none and would refer to the declaration where that file is left out: move it to a file without build constraints", c.Text, cf.why)
			}
		}
	}
}

// constrainedMethods refuses methods declared in a file with a build
// constraint that would be handle methods of a handler (exported, two
// parameters, one result, on the handler's type): the registration in
// seqby_gen.go would call them where they do not exist. The check is on
// syntax, so files the go command left out on this platform give the same
// errors; handleMethods skips such methods.
func (s *scanner) constrainedMethods(ld *loaded) {
	byName := map[string]*handler{}
	for _, h := range s.m.handlers {
		byName[h.qualified()] = h
	}
	for _, p := range append(append([]*packages.Package{}, ld.roots...), ld.deps...) {
		for _, cf := range s.cfiles[p] {
			for _, decl := range cf.file.Decls {
				fd, ok := decl.(*ast.FuncDecl)
				if !ok || fd.Recv == nil || len(fd.Recv.List) != 1 || !fd.Name.IsExported() {
					continue
				}
				h := byName[p.PkgPath+"."+recvBase(fd.Recv.List[0].Type)]
				if h == nil {
					continue
				}
				if fd.Type.Results.NumFields() == 1 && fd.Type.Params.NumFields() == 2 {
					s.probs.add(fd.Name.Pos(), "%s: handle method %s is declared in a file with a build constraint (%s); seqby_gen.go calls it on every platform: move it to a file without build constraints", h.describe(), fd.Name.Name, cf.why)
					continue
				}
				// A near miss of a handle method (see nearMiss) is refused
				// too, on every platform alike, rather than skipped.
				if msg := s.syntaxMessage(p, cf.file, fd); msg != nil {
					s.probs.add(fd.Name.Pos(), "%s: method %s takes %s %s and is declared in a file with a build constraint (%s); seqgen reads handle methods on every platform alike: move it to a file without build constraints, or unexport it if it is not meant to handle %s",
						h.describe(), fd.Name.Name, msg.kind, msg.name, cf.why, msg.name)
				}
			}
		}
	}
}

// syntaxMessage is the message of the module that a parameter of fd, a
// method declared in f, takes as M, *M or ...M (M a name of p or pkg.M),
// read from syntax: the go command may leave f out on this platform, so
// fd has no types; nil when there is none.
func (s *scanner) syntaxMessage(p *packages.Package, f *ast.File, fd *ast.FuncDecl) *message {
	imports := map[string]*types.Package{}
	for _, spec := range f.Imports {
		path, err := strconv.Unquote(spec.Path.Value)
		imp := p.Imports[path]
		if err != nil || imp == nil || imp.Types == nil {
			continue
		}
		name := imp.Types.Name()
		if spec.Name != nil {
			name = spec.Name.Name
		}
		imports[name] = imp.Types
	}
	for _, param := range fd.Type.Params.List {
		x := param.Type
		if e, ok := x.(*ast.Ellipsis); ok {
			x = e.Elt
		}
		for {
			if e, ok := x.(*ast.ParenExpr); ok {
				x = e.X
			} else if e, ok := x.(*ast.StarExpr); ok {
				x = e.X
			} else {
				break
			}
		}
		var obj types.Object
		switch e := x.(type) {
		case *ast.Ident:
			obj = p.Types.Scope().Lookup(e.Name)
		case *ast.SelectorExpr:
			if id, ok := e.X.(*ast.Ident); ok && imports[id.Name] != nil {
				obj = imports[id.Name].Scope().Lookup(e.Sel.Name)
			}
		}
		tn, ok := obj.(*types.TypeName)
		if !ok {
			continue
		}
		if named, ok := types.Unalias(tn.Type()).(*types.Named); ok && named.Obj().Pkg() != nil {
			if msg := s.m.msgs[named.Obj().Pkg().Path()+"."+named.Obj().Name()]; msg != nil {
				return msg
			}
		}
	}
	return nil
}

// recvBase is the type name of a receiver expression: T in T, *T, T[P].
func recvBase(x ast.Expr) string {
	for {
		switch e := x.(type) {
		case *ast.StarExpr:
			x = e.X
		case *ast.ParenExpr:
			x = e.X
		case *ast.IndexExpr:
			x = e.X
		case *ast.IndexListExpr:
			x = e.X
		case *ast.Ident:
			return e.Name
		default:
			return ""
		}
	}
}

func (s *scanner) genDecl(p *packages.Package, root bool, d *ast.GenDecl, used map[*ast.Comment]bool) {
	groupMarkers := s.markersOf(d.Doc, used)
	if d.Tok != token.TYPE {
		s.check(annotations.Elsewhere, groupMarkers)
		return
	}
	if d.Lparen.IsValid() && len(d.Specs) != 1 && len(groupMarkers) > 0 {
		for _, f := range groupMarkers {
			s.probs.add(f.Pos, "marker %s is in the doc of a grouped type declaration of %d types; put it on the type spec it is for", f.Marker, len(d.Specs))
		}
		groupMarkers = nil
	}
	for _, spec := range d.Specs {
		ts := spec.(*ast.TypeSpec)
		found := append(append([]annotations.Found{}, groupMarkers...), s.markersOf(ts.Doc, used)...)
		if len(found) == 0 {
			continue
		}
		obj, _ := p.TypesInfo.Defs[ts.Name].(*types.TypeName)
		switch {
		case ts.TypeParams != nil && ts.Assign.IsValid():
			// One error for the declaration, at its first marker.
			s.probs.add(found[0].Pos, "marker %s on type alias %s: a generic alias is not allowed; seqgen declares non-generic types only", found[0].Marker, ts.Name.Name)
			continue
		case ts.TypeParams != nil:
			s.probs.add(found[0].Pos, "marker %s is not allowed on generic type %s; seqgen writes methods on non-generic types only", found[0].Marker, ts.Name.Name)
			s.refusedTypes[p.PkgPath+"."+ts.Name.Name] = annotations.MeantRole(found)
			continue
		case obj == nil:
			continue // the type did not type-check far enough to be named
		case ts.Assign.IsValid():
			s.alias(p, root, ts, obj, found)
			continue
		}
		named, ok := types.Unalias(obj.Type()).(*types.Named)
		if !ok {
			continue
		}
		target := annotations.OtherType
		if _, isStruct := named.Underlying().(*types.Struct); isStruct {
			target = annotations.StructType
		}
		set := s.check(target, found)
		if role := annotations.MeantRole(found); role != "" && !hasRole(set) {
			s.refusedTypes[p.PkgPath+"."+ts.Name.Name] = role
			continue
		}
		s.declare(p, root, ts, named, set)
	}
}

// refused reports whether named's markers were refused where it is
// declared (and no other declaration made it a message).
func (s *scanner) refused(named *types.Named) bool {
	key := named.Obj().Pkg().Path() + "." + named.Obj().Name()
	return s.refusedTypes[key] != "" && s.m.msgs[key] == nil
}

func hasRole(set annotations.Set) bool {
	for _, role := range []string{annotations.Event, annotations.Command, annotations.Handler, annotations.CommandHandler, annotations.PM} {
		if set.Has(role) {
			return true
		}
	}
	return false
}

func (s *scanner) declare(p *packages.Package, root bool, ts *ast.TypeSpec, named *types.Named, set annotations.Set) {
	if s.message(p, root, ts, named, set, false) {
		return
	}
	for _, role := range []string{annotations.Handler, annotations.CommandHandler, annotations.PM} {
		if f, ok := set[role]; ok {
			if why := noMethods(named); why != "" {
				s.probs.add(f.Pos, "marker %s is not allowed on %s", f.Marker, why)
				s.refusedTypes[p.PkgPath+"."+ts.Name.Name] = role
				return
			}
			h := &handler{pkg: p, name: ts.Name.Name, named: named, kind: role, rolePos: f.Pos,
				pos: ts.Name.Pos(), root: root, sequential: set.Has(annotations.Sequential)}
			if k, ok := set[annotations.Key]; ok {
				h.key, h.keyPos = k.Value, k.Pos
			}
			if n, ok := set[annotations.Name]; ok {
				h.stableName, h.namePos = n.Value, n.Pos
			}
			s.m.handlers = append(s.m.handlers, h)
			return
		}
	}
}

// noMethods explains why named, a handler's type, can have no methods, or
// returns "": Go declares none on a type whose underlying type is an
// interface or a pointer, so it could have neither handle methods nor the
// SeqbyRegistration seqgen writes.
func noMethods(named *types.Named) string {
	name := named.Obj().Name()
	const cannot = "Go allows no methods to be declared on %s, so %s cannot have handle methods or the SeqbyRegistration method seqgen writes; %s"
	switch u := named.Underlying().(type) {
	case *types.Interface:
		return fmt.Sprintf("interface type %s: "+cannot, name, "an interface type", name,
			"mark a type that implements "+name+" instead")
	case *types.Pointer:
		fix := "mark a named struct type instead"
		if n, ok := types.Unalias(u.Elem()).(*types.Named); ok && n.Obj().Pkg() == named.Obj().Pkg() {
			fix = "mark " + n.Obj().Name() + ", the type " + name + " points to, instead"
		}
		return fmt.Sprintf("pointer type %s: "+cannot, name, "a defined pointer type", name, fix)
	}
	return ""
}

// message records the event or command set declares, if any. alias tells
// that ts is a marked alias of named, a type of another package.
func (s *scanner) message(p *packages.Package, root bool, ts *ast.TypeSpec, named *types.Named, set annotations.Set, alias bool) bool {
	for _, role := range []string{annotations.Event, annotations.Command} {
		f, ok := set[role]
		if !ok {
			continue
		}
		// The methods seqgen writes go on the type itself, named by its own
		// name; an alias of another package's type is named by the alias.
		name := named.Obj().Name()
		if alias {
			name = ts.Name.Name
		}
		msg := &message{pkg: p, name: name, named: named, kind: role, category: f.Value,
			rolePos: f.Pos, pos: ts.Name.Pos(), root: root, noCopy: noCopy(named), alias: alias,
			viaAlias: ts.Assign.IsValid(), aliasName: ts.Name.Name}
		if k, ok := set[annotations.Key]; ok {
			msg.key, msg.keyPos = k.Value, k.Pos
		}
		if first, ok := s.m.msgs[msg.qualified()]; ok {
			// The same type declared twice: two aliases of it, or an alias
			// of a type that carries markers itself. Report the alias, or
			// the later of two.
			later, earlier := msg, first
			if first.viaAlias != msg.viaAlias && first.viaAlias || first.viaAlias == msg.viaAlias && s.probs.before(msg.rolePos, first.rolePos) {
				later, earlier = first, msg // the alias is the one to remove
			}
			s.probs.addRelated(later.rolePos, fmt.Sprintf("%s is declared a message twice; declare it once, on one type or one alias", types.TypeString(named, nil)),
				related{earlier.rolePos, earlier.declaredAs() + " here"})
			s.m.msgs[msg.qualified()] = earlier
			return true
		}
		s.m.msgs[msg.qualified()] = msg
		return true
	}
	return false
}

// alias reads the markers of a type alias. An alias declares a type of
// another package (a protobuf message, a shared contracts module's
// struct) an event or command of this module: seqgen writes no methods on
// it, but a function Seqby<Alias> beside it that makes it a
// runtime.Message (runtime.Foreign), and handlers take the aliased type.
// An alias of a type of its own package (beside a .pb.go, whose file
// protoc rewrites) declares that type as if the markers stood on it.
func (s *scanner) alias(p *packages.Package, root bool, ts *ast.TypeSpec, obj *types.TypeName, found []annotations.Found) {
	// One error for the alias, however many markers it has: at the first.
	target := types.Unalias(obj.Type())
	refuse := func(format string, args ...any) {
		s.probs.add(found[0].Pos, "marker %s on type alias %s: %s", found[0].Marker, ts.Name.Name, fmt.Sprintf(format, args...))
		// Handle methods that take the aliased type give no second error.
		t := target
		if ptr, ok := t.(*types.Pointer); ok {
			t = types.Unalias(ptr.Elem())
		}
		if n, ok := t.(*types.Named); ok && n.Obj().Pkg() != nil {
			s.refusedTypes[n.Obj().Pkg().Path()+"."+n.Obj().Name()] = annotations.MeantRole(found)
		}
	}
	rel := func(other *types.Package) string {
		if other == p.Types {
			return ""
		}
		return other.Name()
	}
	named, ok := target.(*types.Named)
	_, isPtr := target.(*types.Pointer)
	same := ok && named.Obj().Pkg() == p.Types
	switch {
	case target == types.Typ[types.Invalid]:
		refuse("%s", s.unresolved(p, ts))
		return
	case isPtr:
		refuse("%s is a pointer; alias the message type itself (type %s = %s): handlers take it by pointer where they must", types.TypeString(target, rel), ts.Name.Name, types.TypeString(target.(*types.Pointer).Elem(), rel))
		return
	case !ok:
		refuse("%s is not a named type; alias a named struct type (type %s = T, or pkg.T)", types.TypeString(target, rel), ts.Name.Name)
		return
	case named.Obj().Pkg() == nil:
		refuse("%s is predeclared; alias a named struct type (type %s = T, or pkg.T)", named.Obj().Name(), ts.Name.Name)
		return
	case named.TypeArgs().Len() > 0 || named.TypeParams().Len() > 0:
		refuse("%s is generic; seqgen declares non-generic types only", types.TypeString(target, rel))
		return
	case same && s.isConstrained(named.Obj().Pos()):
		refuse("%s is declared in a file with a build constraint (%s); seqby_gen.go has none and would name it where that file is left out", named.Obj().Name(), s.constraintOf(named.Obj().Pos()))
		return
	case ts.Name.Name == "_" && !same:
		refuse("a blank alias cannot be named by the code that publishes it; give it a name")
		return
	}
	structTarget := annotations.OtherType
	if _, isStruct := named.Underlying().(*types.Struct); isStruct {
		structTarget = annotations.StructType
	}
	set := s.check(structTarget, found)
	if role := annotations.MeantRole(found); role != "" && !hasRole(set) {
		s.refusedTypes[named.Obj().Pkg().Path()+"."+named.Obj().Name()] = role
		return
	}
	for _, role := range []string{annotations.Handler, annotations.CommandHandler, annotations.PM} {
		if f, ok := set[role]; ok && same {
			s.probs.add(f.Pos, "marker %s on type alias %s: a %s goes on the type itself; put the markers on %s", f.Marker, ts.Name.Name, annotations.Prefix+role, named.Obj().Name())
			return
		} else if ok {
			s.probs.add(f.Pos, "marker %s on type alias %s: a %s needs methods seqgen writes (SeqbyRegistration), which only a type declared in this package can have; declare a type here, embedding %s if you want its methods",
				f.Marker, ts.Name.Name, annotations.Prefix+role, types.TypeString(named, rel))
			return
		}
	}
	// An alias of a type of this package (a .pb.go's message, whose file
	// protoc rewrites) declares that type itself: seqgen writes its
	// methods in this package's seqby_gen.go, beside the .pb.go.
	s.message(p, root, ts, named, set, !same)
}

// unresolved explains an alias whose type did not resolve on this
// platform: declared in a file this build leaves out (the same refusal
// every platform gives), in a _test.go file, or nowhere.
func (s *scanner) unresolved(p *packages.Package, ts *ast.TypeSpec) string {
	id, ok := ts.Type.(*ast.Ident)
	if !ok {
		return fmt.Sprintf("the aliased type %s is undefined or does not type-check; fix it first", types.ExprString(ts.Type))
	}
	for _, cf := range s.cfiles[p] {
		if declaresType(cf.file, id.Name) {
			return fmt.Sprintf("%s is declared in a file with a build constraint (%s); seqby_gen.go has none and would name it where that file is left out", id.Name, cf.why)
		}
	}
	dir := filepath.Dir(s.fset.Position(ts.Pos()).Filename)
	for _, f := range s.tests {
		if filepath.Dir(s.fset.Position(f.Package).Filename) == dir && declaresType(f, id.Name) {
			return fmt.Sprintf("%s is declared in a _test.go file, which seqgen does not read; declare it in a non-test file", id.Name)
		}
	}
	return fmt.Sprintf("the aliased type %s is undefined or does not type-check; fix it first", id.Name)
}

// undefinedType describes the type of v, a struct field whose type did not
// type-check, as its declaration writes it: go/types keeps no name for an
// undefined type (it is types.Typ[Invalid]). The result reads "type
// AccountID, which is undefined or does not type-check", or for a type
// defined on one that is undefined "type AccountID, whose underlying type
// Undefined is undefined or does not type-check"; the declarations are read
// from the files fset names.
func undefinedType(fset *token.FileSet, v *types.Var) string {
	const bad = "is undefined or does not type-check"
	t := types.Unalias(v.Type())
	if p, ok := t.(*types.Pointer); ok {
		t = types.Unalias(p.Elem())
	}
	if n, ok := t.(*types.Named); ok && n.Obj().Pkg() != nil {
		if under := declaredExpr(fset, n.Obj().Pos()); under != "" {
			return fmt.Sprintf("type %s, whose underlying type %s %s", typeString(v.Type()), under, bad)
		}
		return fmt.Sprintf("type %s, whose underlying type %s", typeString(v.Type()), bad)
	}
	if expr := declaredExpr(fset, v.Pos()); expr != "" {
		return fmt.Sprintf("type %s, which %s", expr, bad)
	}
	return "a type that " + bad
}

// declaredExpr is the type expression declared at pos, the name of a
// struct field (or an embedded field's type) or of a type spec, read from
// the file fset names; "" when it cannot be read.
func declaredExpr(fset *token.FileSet, pos token.Pos) string {
	if fset == nil || !pos.IsValid() {
		return ""
	}
	at := fset.Position(pos)
	own := token.NewFileSet()
	f, err := parser.ParseFile(own, at.Filename, nil, parser.SkipObjectResolution)
	if f == nil || err != nil && len(f.Decls) == 0 {
		return ""
	}
	offset := func(p token.Pos) int { return own.Position(p).Offset }
	var expr ast.Expr
	ast.Inspect(f, func(n ast.Node) bool {
		if n == nil || expr != nil || offset(n.Pos()) > at.Offset || offset(n.End()) <= at.Offset {
			return false // only the nodes that hold pos
		}
		switch n := n.(type) {
		case *ast.Field:
			if len(n.Names) == 0 && offset(n.Type.Pos()) <= at.Offset {
				expr = n.Type
			}
			for _, id := range n.Names {
				if offset(id.Pos()) == at.Offset {
					expr = n.Type
				}
			}
		case *ast.TypeSpec:
			if offset(n.Name.Pos()) == at.Offset {
				expr = n.Type
			}
		}
		return expr == nil
	})
	if expr == nil {
		return ""
	}
	return types.ExprString(expr)
}

// declaresType reports whether f declares a type named name at top level.
func declaresType(f *ast.File, name string) bool {
	for _, decl := range f.Decls {
		if d, ok := decl.(*ast.GenDecl); ok && d.Tok == token.TYPE {
			for _, spec := range d.Specs {
				if spec.(*ast.TypeSpec).Name.Name == name {
					return true
				}
			}
		}
	}
	return false
}

// constraintOf describes the build constraint of the file holding pos.
func (s *scanner) constraintOf(pos token.Pos) string {
	if why, ok := s.constrained[s.fset.Position(pos).Filename]; ok {
		return why
	}
	return s.constrained[s.fset.File(pos).Name()]
}

// handleMethods finds h's handle methods: the exported methods of *T's
// method set, those declared on T and those promoted from embedded fields
// alike (the generated code calls them through T, as Go does), with the
// signature func (R) Name(context.Context, M) error or (context.Context,
// *M) error and M a message of the kind h handles.
func (s *scanner) handleMethods(h *handler) {
	wantKind := annotations.Event
	if h.kind == annotations.CommandHandler {
		wantKind = annotations.Command
	}
	mset := types.NewMethodSet(types.NewPointer(h.named))
	sels := make([]*types.Selection, mset.Len())
	for i := range sels {
		sels[i] = mset.At(i)
	}
	// Declaration order, so "both handle" errors point at the later method.
	sort.SliceStable(sels, func(i, j int) bool { return s.probs.before(sels[i].Obj().Pos(), sels[j].Obj().Pos()) })
	for _, sel := range sels {
		fn := sel.Obj().(*types.Func)
		markers := s.methodMarkers[fn.Pos()]
		s.consumed[fn.Pos()] = true
		if fn.Pos().IsValid() && s.isConstrained(fn.Pos()) {
			continue // constrainedMethods refuses it, on every platform alike
		}
		if !fn.Exported() {
			if markers.Has(annotations.Correlate) {
				s.probs.add(markers[annotations.Correlate].Pos, "%scorrelate on %s.%s, which is unexported and so not a handle method", annotations.Prefix, h.name, fn.Name())
			}
			continue
		}
		if named, _ := handleParam(fn); named != nil && s.refused(named) {
			h.refusedMethods = true // the message type's own marker was refused
			continue
		}
		msg, ptr, why := s.handleSignature(fn, wantKind)
		if msg == nil && s.undeclaredForeign(fn) {
			// Likely declared by an alias in a package this run did not
			// load: dropping the route in silence would leave the events
			// unhandled.
			s.probs.add(fn.Pos(), "%s: %s.%s takes a message type of another module, but %s (unexport the method if it is not a handle method)", h.describe(), h.name, fn.Name(), why)
			h.refusedMethods = true
			continue
		}
		if msg == nil && s.nearMiss(h, fn) {
			h.refusedMethods = true
			continue
		}
		if msg == nil {
			if why != "" {
				h.nearMisses = append(h.nearMisses, related{fn.Pos(), fmt.Sprintf("%s.%s is not a handle method: %s", h.name, fn.Name(), why)})
			}
			if markers.Has(annotations.Correlate) {
				s.probs.add(markers[annotations.Correlate].Pos, "%scorrelate on %s.%s, which is not a handle method (want func (%s) %s(context.Context, E) error with E an event)",
					annotations.Prefix, h.name, fn.Name(), h.name, fn.Name())
			}
			continue
		}
		if h.kind == annotations.PM && !s.pmReceiver(h, sel) {
			h.refusedMethods = true
			continue
		}
		if msg.noCopy != "" && !ptr {
			qual := func(p *types.Package) string {
				if p == h.pkg.Types {
					return ""
				}
				return p.Name()
			}
			param := types.TypeString(msg.named, qual)
			s.probs.add(fn.Pos(), "%s: handle method %s takes %s by value, but %s holds a lock (%s) and must not be copied; declare it func (%s) %s(context.Context, *%s) error",
				h.describe(), fn.Name(), param, msg.name, msg.noCopy, types.TypeString(fn.Type().(*types.Signature).Recv().Type(), qual), fn.Name(), param)
			h.refusedMethods = true
			continue
		}
		hm := &handleMethod{name: fn.Name(), pos: fn.Pos(), msg: msg, ptrParam: ptr}
		if c, ok := markers[annotations.Correlate]; ok {
			if h.kind != annotations.PM {
				s.probs.add(c.Pos, "%scorrelate on %s.%s: %s is not a %spm; only a pm's handle methods correlate", annotations.Prefix, h.name, fn.Name(), h.describe(), annotations.Prefix)
			} else {
				hm.correlate, hm.correlatePos = c.Value, c.Pos
			}
		}
		h.methods = append(h.methods, hm)
	}
	s.hiddenMethods(h, mset, wantKind)
}

// hiddenMethods refuses the handle methods of h's embedded fields that
// *T's method set leaves out, which Go does without a word: one declared
// by two embedded fields at the same depth (ambiguous), or one hidden by
// a method of the same name nearer T. Each would never run.
func (s *scanner) hiddenMethods(h *handler, mset *types.MethodSet, wantKind string) {
	// By origin: an instantiated generic type's methods are objects of
	// their own.
	selected := map[*types.Func]bool{}
	for i := range mset.Len() {
		selected[mset.At(i).Obj().(*types.Func).Origin()] = true
	}
	seen := map[*types.Named]bool{h.named: true}
	var walk func(t types.Type, path string)
	walk = func(t types.Type, path string) {
		st, ok := derefStruct(t)
		if !ok {
			return
		}
		for i := range st.NumFields() {
			f := st.Field(i)
			if !f.Embedded() {
				continue
			}
			ft := types.Unalias(f.Type())
			if p, ok := ft.(*types.Pointer); ok {
				ft = types.Unalias(p.Elem())
			}
			named, ok := ft.(*types.Named)
			if !ok || seen[named] {
				continue
			}
			seen[named] = true
			field := path + f.Name()
			for j := range named.NumMethods() {
				fn := named.Method(j)
				if !fn.Exported() || selected[fn.Origin()] || s.consumed[fn.Pos()] {
					continue
				}
				if msg, _, _ := s.handleSignature(fn, wantKind); msg == nil {
					continue
				}
				s.consumed[fn.Pos()] = true // its markers are reported here, not as stray
				h.refusedMethods = true
				if shadow := mset.Lookup(fn.Pkg(), fn.Name()); shadow != nil {
					s.probs.add(fn.Pos(), "%s: handle method %s of embedded field %s is hidden by %s, nearer %s, so Go leaves it out of the method set of *%s and it would never run; rename one of them",
						h.describe(), fn.Name(), field, methodName(shadow.Obj().(*types.Func)), h.name, h.name)
					continue
				}
				s.probs.add(fn.Pos(), "%s: handle method %s of embedded field %s is declared by another embedded field at the same depth too, so Go leaves it out of the method set of *%s and it would never run; declare %s on %s, calling the one you mean",
					h.describe(), fn.Name(), field, h.name, fn.Name(), h.name)
			}
			walk(named, field+".")
		}
	}
	walk(h.named, "")
}

// pmReceiver refuses a pm handle method that cannot change the pm's state:
// one with a value receiver works on a copy, and one promoted through an
// embedded pointer or interface finds it nil in the zero state a pm
// instance starts from. Each such method is refused once, at the method.
func (s *scanner) pmReceiver(h *handler, sel *types.Selection) bool {
	fn := sel.Obj().(*types.Func)
	if s.refusedPM[fn.Pos()] {
		return false
	}
	t := types.Type(h.named)
	idx := sel.Index()
	for _, i := range idx[:len(idx)-1] {
		st, ok := derefStruct(t)
		if !ok {
			break
		}
		f := st.Field(i)
		switch types.Unalias(f.Type()).Underlying().(type) {
		case *types.Pointer, *types.Interface:
			s.refusedPM[fn.Pos()] = true
			s.probs.add(fn.Pos(), "pm %s: handle method %s is promoted through embedded field %s of type %s, which is nil in the new state a pm instance starts from; embed it by value",
				h.name, fn.Name(), f.Name(), types.TypeString(f.Type(), types.RelativeTo(h.pkg.Types)))
			return false
		}
		t = f.Type()
	}
	recv := fn.Type().(*types.Signature).Recv()
	if _, ptr := types.Unalias(recv.Type()).(*types.Pointer); !ptr {
		s.refusedPM[fn.Pos()] = true
		base := types.TypeString(recv.Type(), types.RelativeTo(h.pkg.Types))
		s.probs.add(fn.Pos(), "pm %s: handle method %s has a value receiver (func (%s) %s), so its changes to the pm's state would be lost; declare it func (*%s) %s",
			h.name, fn.Name(), base, fn.Name(), base, fn.Name())
		return false
	}
	return true
}

func derefStruct(t types.Type) (*types.Struct, bool) {
	t = types.Unalias(t)
	if p, ok := t.Underlying().(*types.Pointer); ok {
		t = types.Unalias(p.Elem())
	}
	st, ok := t.Underlying().(*types.Struct)
	return st, ok
}

// handleSignature reports the message a method handles, or why it does not
// handle one ("" when it is plainly some other method).
func (s *scanner) handleSignature(fn *types.Func, wantKind string) (msg *message, ptr bool, why string) {
	named, ptr := handleParam(fn)
	if named == nil {
		return nil, false, ""
	}
	m := s.m.msgs[named.Obj().Pkg().Path()+"."+named.Obj().Name()]
	switch {
	case m == nil:
		why := fmt.Sprintf("%s has no %sevent or %scommand marker", named.Obj().Name(), annotations.Prefix, annotations.Prefix)
		if !s.owned(named.Obj().Pkg().Path()) {
			why = fmt.Sprintf("no package seqgen loaded declares %s: declare it with a marked alias (type %s = %s.%s); if an alias declares it already, run seqgen on the whole module (./... from its root) or import the alias's package here",
				named.Obj().Name(), named.Obj().Name(), named.Obj().Pkg().Name(), named.Obj().Name())
		}
		return nil, false, why
	case m.kind != wantKind:
		return nil, false, fmt.Sprintf("%s is %s %s, and this type handles %ss", m.name, article(m.kind), m.kind, wantKind)
	}
	return m, ptr, ""
}

// handleParam is the message parameter's named type (and whether it is
// taken as a pointer) of a method with a handle method's shape, func
// (context.Context, M) error or (context.Context, *M) error; nil for any
// other method.
func handleParam(fn *types.Func) (named *types.Named, ptr bool) {
	sig := fn.Type().(*types.Signature)
	if sig.Params().Len() != 2 || sig.Results().Len() != 1 || sig.Variadic() {
		return nil, false
	}
	if !isNamed(sig.Params().At(0).Type(), "context", "Context") || !types.Identical(sig.Results().At(0).Type(), types.Universe.Lookup("error").Type()) {
		return nil, false
	}
	t := types.Unalias(sig.Params().At(1).Type())
	if p, ok := t.(*types.Pointer); ok {
		t, ptr = types.Unalias(p.Elem()), true
	}
	named, ok := t.(*types.Named)
	if !ok || named.Obj().Pkg() == nil {
		return nil, false
	}
	return named, ptr
}

// nearMiss refuses an exported method of h's method set that takes a
// message of the module (M, *M, or ...M) but is not one of h's handle
// methods: another signature (no context, no error result, a parameter
// more), or a message of the kind h does not handle. seqgen would write no
// route for it, and the engine would never call it. It reports whether it
// refused fn; a method that takes no message type is left alone.
func (s *scanner) nearMiss(h *handler, fn *types.Func) bool {
	wantKind := annotations.Event
	if h.kind == annotations.CommandHandler {
		wantKind = annotations.Command
	}
	sig := fn.Type().(*types.Signature)
	msg, param := s.messageParam(sig, wantKind)
	if msg == nil {
		return false
	}
	if s.refusedNear[fn.Pos()] {
		return true
	}
	s.refusedNear[fn.Pos()] = true
	qual := func(p *types.Package) string {
		if p == fn.Pkg() {
			return ""
		}
		return p.Name()
	}
	name := fn.Name()
	if n := methodName(fn); h.named.Obj().Name()+"."+fn.Name() != n {
		name = n // promoted from an embedded field
	}
	if msg.kind != wantKind {
		where := annotations.Prefix + annotations.CommandHandler
		if msg.kind == annotations.Event {
			where = annotations.Prefix + annotations.Handler + " or " + annotations.Prefix + annotations.PM
		}
		s.probs.add(fn.Pos(), "%s: method %s takes %s %s, but a %s handles %ss only, so it is not a handle method and the engine would never call it; handle %s in a %s, or unexport the method if it is not meant to handle %s",
			h.describe(), name, msg.kind, msg.name, strings.TrimSuffix(h.describe(), " "+h.name), wantKind, msg.name, where, msg.name)
		return true
	}
	var why []string
	params := sig.Params()
	switch {
	case !isNamed(params.At(0).Type(), "context", "Context"):
		why = append(why, fmt.Sprintf("its first parameter is %s, not a context.Context", types.TypeString(params.At(0).Type(), qual)))
	case params.Len() != 2:
		why = append(why, fmt.Sprintf("it takes %d parameters, not 2", params.Len()))
	case sig.Variadic():
		why = append(why, "its message parameter is variadic")
	}
	switch res := sig.Results(); {
	case res.Len() == 0:
		why = append(why, "it returns nothing")
	case res.Len() > 1:
		why = append(why, fmt.Sprintf("it returns %s, not error", types.TypeString(res, qual)))
	case !types.Identical(res.At(0).Type(), types.Universe.Lookup("error").Type()):
		why = append(why, fmt.Sprintf("it returns %s, not error", types.TypeString(res.At(0).Type(), qual)))
	}
	if len(why) == 0 {
		return false // not reached: that is a handle method's signature
	}
	m := types.TypeString(param, qual)
	if _, ptr := types.Unalias(param).(*types.Pointer); !ptr && msg.noCopy != "" {
		m = "*" + m // it must not be copied
	}
	recv := types.TypeString(sig.Recv().Type(), qual)
	if _, ptr := types.Unalias(sig.Recv().Type()).(*types.Pointer); !ptr && h.kind == annotations.PM {
		recv = "*" + recv // a pm's changes must be kept
	}
	s.probs.add(fn.Pos(), "%s: method %s takes %s %s but is not a handle method: %s, so the engine would never call it; declare it func (%s) %s(context.Context, %s) error, or unexport it if it is not meant to handle %s",
		h.describe(), name, msg.kind, msg.name, strings.Join(why, ", and "), recv, fn.Name(), m, msg.name)
	return true
}

// messageParam finds the message of the module a signature takes, as M, *M
// or a variadic ...M, preferring one of kind wantKind; param is the
// parameter's type (the element's, for ...M), as the method writes it.
func (s *scanner) messageParam(sig *types.Signature, wantKind string) (msg *message, param types.Type) {
	for i := range sig.Params().Len() {
		t := sig.Params().At(i).Type()
		if sl, ok := types.Unalias(t).(*types.Slice); ok && sig.Variadic() && i == sig.Params().Len()-1 {
			t = sl.Elem()
		}
		base := types.Unalias(t)
		if p, ok := base.(*types.Pointer); ok {
			base = types.Unalias(p.Elem())
		}
		named, ok := base.(*types.Named)
		if !ok || named.Obj().Pkg() == nil {
			continue
		}
		m := s.m.msgs[named.Obj().Pkg().Path()+"."+named.Obj().Name()]
		if m == nil {
			continue
		}
		if m.kind == wantKind {
			return m, t
		}
		if msg == nil {
			msg, param = m, t
		}
	}
	return msg, param
}

// undeclaredForeign reports whether fn has a handle method's shape but
// takes a struct type of another module that no loaded package declares.
func (s *scanner) undeclaredForeign(fn *types.Func) bool {
	named, _ := handleParam(fn)
	if named == nil || s.owned(named.Obj().Pkg().Path()) {
		return false
	}
	if first, _, _ := strings.Cut(named.Obj().Pkg().Path(), "/"); !strings.Contains(first, ".") {
		return false // the standard library's: not a contracts type
	}
	if _, isStruct := named.Underlying().(*types.Struct); !isStruct {
		return false
	}
	return s.m.msgs[named.Obj().Pkg().Path()+"."+named.Obj().Name()] == nil
}

// owned reports whether the package at path belongs to a module of the
// root packages.
func (s *scanner) owned(path string) bool {
	for mod := range s.modules {
		if path == mod || strings.HasPrefix(path, mod+"/") {
			return true
		}
	}
	return false
}

func isNamed(t types.Type, pkg, name string) bool {
	n, ok := types.Unalias(t).(*types.Named)
	return ok && n.Obj().Pkg() != nil && n.Obj().Pkg().Path() == pkg && n.Obj().Name() == name
}

// strayCorrelates reports correlate markers on methods of types that are
// not handlers at all.
func (s *scanner) strayCorrelates() {
	for pos, set := range s.methodMarkers {
		if s.consumed[pos] || s.refusedTypes[s.methodRecv[pos]] == annotations.PM {
			continue // a pm refused at its declaration: its correlates are its
		}
		if c, ok := set[annotations.Correlate]; ok {
			s.probs.add(c.Pos, "%scorrelate is on a method of a type that is not a %spm; mark the type %spm or remove the marker", annotations.Prefix, annotations.Prefix, annotations.Prefix)
		}
	}
}

func article(word string) string {
	if word != "" && strings.ContainsRune("aeiou", rune(word[0])) {
		return "an"
	}
	return "a"
}

// methodName is "Recv.Name" of a method, its receiver's base type name.
func methodName(fn *types.Func) string {
	recv := fn.Type().(*types.Signature).Recv().Type()
	if p, ok := types.Unalias(recv).(*types.Pointer); ok {
		recv = p.Elem()
	}
	if n, ok := types.Unalias(recv).(*types.Named); ok {
		return n.Obj().Name() + "." + fn.Name()
	}
	return fn.Name()
}
