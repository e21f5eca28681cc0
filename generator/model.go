package generator

import (
	"go/parser"
	"go/token"

	"github.com/seqby/seqby/annotations"
	"go/types"

	"golang.org/x/tools/go/packages"
)

// model is everything the markers declare across the loaded packages.
type model struct {
	msgs     map[string]*message // by qualified name "path.Name"
	handlers []*handler
	// byCategory lists each category's message types, sorted by name.
	byCategory map[string][]*message
	// constrained maps the files with a build constraint to its
	// description (see constraint.go).
	constrained map[string]string
	// outside caches fileConstraint of files outside the loaded packages
	// (the package of an aliased type, in another module).
	outside map[string]string
}

// fileConstraint describes the build constraint of a file outside the
// loaded packages, read from disk ("" when it has none or cannot be read):
// a key field of an aliased type may be declared in another module.
func (m *model) fileConstraint(name string) string {
	if name == "" {
		return ""
	}
	if why, ok := m.outside[name]; ok {
		return why
	}
	why := ""
	if f, err := parser.ParseFile(token.NewFileSet(), name, nil, parser.ImportsOnly|parser.ParseComments); err == nil {
		why = fileConstraint(name, f)
	}
	if m.outside == nil {
		m.outside = map[string]string{}
	}
	m.outside[name] = why
	return why
}

// message is an event or command type.
type message struct {
	pkg      *packages.Package
	name     string
	named    *types.Named
	kind     string // annotations.Event or annotations.Command
	category string
	rolePos  token.Pos // the event or command marker
	key      string    // //seqby:key value, "" when absent
	keyPos   token.Pos
	pos      token.Pos // the type's name
	root     bool      // seqgen writes this type's package
	// noCopy is the lock type a value of the message holds ("sync.Mutex"),
	// "" when it may be copied; see nocopy.go.
	noCopy string
	// alias tells that the message is declared by a marked alias in pkg,
	// name being the alias's name, of named, a type of another package:
	// seqgen writes the function Seqby<name> instead of methods.
	alias bool
	// viaAlias tells that the markers stand on an alias (of a type of
	// any package) named aliasName, rather than on the type itself.
	viaAlias  bool
	aliasName string
}

// qualified is the message type's "import/path.Name": the aliased type's
// for an alias, so a handle method's parameter finds it either way.
func (m *message) qualified() string {
	return m.named.Obj().Pkg().Path() + "." + m.named.Obj().Name()
}

// typePkg is the package that declares the message type: the aliased
// type's for an alias.
func (m *message) typePkg() *types.Package { return m.named.Obj().Pkg() }

// wire is the type's wire name, written in each entry: the Go type name,
// which for an alias is the aliased type's (what reflect names).
func (m *message) wire() string { return m.named.Obj().Name() }

// declaredAs describes where the markers stand, for related positions.
func (m *message) declaredAs() string {
	if m.viaAlias {
		return "alias " + m.pkg.PkgPath + "." + m.aliasName
	}
	return m.qualified()
}

// foreignFunc names the function seqgen writes for an alias.
func (m *message) foreignFunc() string { return "Seqby" + m.name }

// handler is a handler, command handler or process manager.
type handler struct {
	pkg        *packages.Package
	name       string
	named      *types.Named
	kind       string // annotations.Handler, CommandHandler or PM
	rolePos    token.Pos
	key        string
	keyPos     token.Pos
	sequential bool
	// stableName is the //seqby:name value, "" when absent; namePos is
	// the marker's position.
	stableName string
	namePos    token.Pos
	pos        token.Pos
	root       bool
	methods    []*handleMethod
	// refusedMethods reports that some handle method was refused at the
	// method itself, so "no handle methods" would only repeat it.
	refusedMethods bool
	// nearMisses explains exported methods that look like handle methods
	// but are not, for the "no handle methods" error.
	nearMisses []related
}

func (h *handler) qualified() string { return h.pkg.PkgPath + "." + h.name }

// groupName is the handler's Registration.Name, its consumer group: the
// //seqby:name value, else "import/path.Type". It must not change while
// the handler's history matters: a new name is a new group, which starts
// reading where the engine's NewHandlerStart says.
func (h *handler) groupName() string {
	if h.stableName != "" {
		return h.stableName
	}
	return h.qualified()
}

// describe names the handler in messages: "handler Ledger", "command
// handler Place", "pm Fulfilment".
func (h *handler) describe() string {
	if h.kind == annotations.CommandHandler {
		return "command handler " + h.name
	}
	return h.kind + " " + h.name
}

// handleMethod is one handle method of a handler.
type handleMethod struct {
	name         string
	pos          token.Pos
	msg          *message
	ptrParam     bool // the message is taken as *M
	correlate    string
	correlatePos token.Pos
}

// related is a position-and-message pair before it is rendered.
type related struct {
	pos token.Pos
	msg string
}
