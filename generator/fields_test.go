package generator

import (
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"strings"
	"testing"
)

const fieldsSrc = `package p

import "fmt"

type Base struct{ Tenant string ` + "`json:\"tenant\"`" + ` }
type Other struct{ Tenant string ` + "`json:\"tenant\"`" + ` }
type Level int
func (Level) String() string { return "" }
type Ptr struct{}
func (*Ptr) String() string { return "" }

type M struct {
	Base
	ClientID string ` + "`json:\"client_id,omitempty\"`" + `
	Name     string ` + "`json:\"display\"`" + `
	Hidden   string ` + "`json:\"-\"`" + `
	lower    string
	Level    Level
	PtrS     Ptr
	N        *uint8
	PP       **string
	F        float64
	S        fmt.Stringer
	Tagged   Base ` + "`json:\"tagged\"`" + `
}

type Amb struct {
	Base
	Other
}

type ViaPtr struct{ *Base }

type Common struct{ ID string ` + "`json:\"id\"`" + ` }
type WrapA struct{ Common }
type WrapB struct{ Common }
type Twice struct {
	WrapA
	WrapB
}
`

func TestResolveField(t *testing.T) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "p.go", fieldsSrc, 0)
	if err != nil {
		t.Fatal(err)
	}
	pkg, err := (&types.Config{Importer: importer.Default()}).Check("p", fset, []*ast.File{f}, nil)
	if err != nil {
		t.Fatal(err)
	}
	named := func(name string) *types.Named { return pkg.Scope().Lookup(name).Type().(*types.Named) }
	tests := []struct {
		typ, name string
		path      string // want resolved path, "" when refused
		conv      conversion
		why       string // substring of the refusal
	}{
		{"M", "client_id", "ClientID", convString, ""},
		{"M", "ClientID", "ClientID", convString, ""},
		{"M", "display", "Name", convString, ""},
		{"M", "Name", "Name", convString, ""},
		{"M", "tenant", "Base.Tenant", convString, ""},
		{"M", "Level", "Level", convInt, ""},
		{"M", "PtrS", "PtrS", convStringer, ""},
		{"M", "N", "N", convUint, ""},
		{"M", "S", "S", convStringer, ""},
		{"M", "Hidden", "", 0, "has no field Hidden"},
		{"M", "lower", "", 0, "has no field lower"},
		{"M", "PP", "", 0, "a pointer to a pointer"},
		{"M", "F", "", 0, "not a valid key type"},
		{"M", "Tagged", "", 0, "not a valid key type"},
		{"Amb", "tenant", "", 0, "ambiguous"},
		{"ViaPtr", "tenant", "", 0, "embedded pointer"},
		{"Twice", "id", "", 0, "ambiguous: WrapA.Common.ID and WrapB.Common.ID"},
	}
	for _, tt := range tests {
		got, why := resolveField(named(tt.typ), tt.name)
		if tt.path == "" {
			if got != nil || !strings.Contains(why, tt.why) {
				t.Errorf("%s.%s: got %v, %q; want refusal containing %q", tt.typ, tt.name, got, why, tt.why)
			}
			continue
		}
		if got == nil {
			t.Errorf("%s.%s: refused: %s", tt.typ, tt.name, why)
			continue
		}
		if p := pathString(got.path); p != tt.path || got.conv != tt.conv {
			t.Errorf("%s.%s: got path %s conv %d, want %s conv %d", tt.typ, tt.name, p, got.conv, tt.path, tt.conv)
		}
	}
}

func TestDocWraps(t *testing.T) {
	got := doc(strings.Repeat("word ", 30))
	for _, line := range strings.Split(got, "\n") {
		if len(line) > 76 || !strings.HasPrefix(line, "// ") {
			t.Fatalf("bad doc line %q", line)
		}
	}
}
