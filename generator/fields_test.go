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

import (
	"fmt"
	"net/netip"
	"time"
)

type Base struct{ Tenant string ` + "`json:\"tenant\"`" + ` }
type Other struct{ Tenant string ` + "`json:\"tenant\"`" + ` }
type Level int
func (Level) String() string { return "" }
type Ptr struct{}
func (*Ptr) String() string { return "" }
type Fn func()
func (Fn) String() string { return "" }
type Holds struct{ Inner struct{ C chan int } }
func (Holds) String() string { return "" }
type Text struct{ C chan int }
func (Text) String() string { return "" }
func (*Text) UnmarshalText([]byte) error { return nil }

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
	Fn       Fn
	Holds    *Holds
	Text     Text
	F        float64
	S        fmt.Stringer
	Tagged   Base ` + "`json:\"tagged\"`" + `
	At       time.Time
	AtP      *time.Time
	Addr     netip.Addr
	U        Undefined
	UP       *Undefined
	Inner    ` + "`json:\"inner\"`" + `
}

type Inner struct{ Deep string }

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
	// Undefined is undefined on purpose: seqgen tolerates type errors.
	var typeErrs []error
	conf := &types.Config{Importer: importer.Default(), Error: func(err error) { typeErrs = append(typeErrs, err) }}
	pkg, _ := conf.Check("p", fset, []*ast.File{f}, nil)
	if len(typeErrs) != 2 {
		t.Fatalf("want the two errors about Undefined, got %v", typeErrs)
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
		{"M", "S", "", 0, "field S of M has type fmt.Stringer: the JSON codec cannot decode into an interface"},
		{"M", "Fn", "", 0, "field Fn of M has type p.Fn: the JSON codec cannot encode a function, so no M could be published"},
		{"M", "Holds", "", 0, "field Holds of M has type *p.Holds, and Holds.Inner.C has type chan int: the JSON codec cannot encode a channel"},
		{"M", "Text", "Text", convStringer, ""},
		{"M", "clientid", "", 0, "M has no field clientid (did you mean ClientID?)"},
		{"M", "dispaly", "", 0, "M has no field dispaly (did you mean display?)"},
		{"M", "tenat", "", 0, "M has no field tenat (did you mean tenant?)"},
		{"M", "Hidden", "", 0, `field Hidden of M is tagged json:"-", so the JSON codec does not carry it`},
		{"M", "lower", "", 0, "field lower of M is unexported, so the JSON codec does not carry it"},
		{"M", "Deep", "", 0, `field Inner.Deep of M is inside embedded field Inner, which is tagged json:"inner"`},
		{"M", "nothing", "", 0, "M has no field nothing"},
		{"M", "nothingness", "", 0, "M has no field nothingness"},
		{"M", "At", "", 0, `has type time.Time, whose String form (such as "2009-11-10 23:00:00 +0000 UTC") contains ':'`},
		{"M", "AtP", "", 0, "has type *time.Time, whose String form"},
		{"M", "Addr", "", 0, "has type netip.Addr, whose String form"},
		{"M", "U", "", 0, "has a type that is undefined or does not type-check"},
		{"M", "UP", "", 0, "has a type that is undefined or does not type-check"},
		{"M", "PP", "", 0, "a pointer to a pointer"},
		{"M", "F", "", 0, "not a valid key type"},
		{"M", "Tagged", "", 0, "not a valid key type"},
		{"Amb", "tenant", "", 0, "ambiguous"},
		{"ViaPtr", "tenant", "", 0, "embedded pointer"},
		{"Twice", "id", "", 0, "ambiguous: WrapA.Common.ID and WrapB.Common.ID"},
	}
	for _, tt := range tests {
		got, why := resolveField(fset, named(tt.typ), tt.name)
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

// TestNoSuggestion: a name far from every field gets no "did you mean".
func TestNoSuggestion(t *testing.T) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "p.go", "package p\ntype M struct{ AccountID string `json:\"account_id\"`; Text string }\n", 0)
	if err != nil {
		t.Fatal(err)
	}
	pkg, err := (&types.Config{}).Check("p", fset, []*ast.File{f}, nil)
	if err != nil {
		t.Fatal(err)
	}
	m := pkg.Scope().Lookup("M").Type().(*types.Named)
	for name, want := range map[string]string{
		"nothing":   "M has no field nothing",
		"tx":        "M has no field tx",
		"acount_id": "M has no field acount_id (did you mean account_id?)",
		"accountid": "M has no field accountid (did you mean AccountID?)",
		"txet":      "M has no field txet (did you mean Text?)",
	} {
		if _, why := resolveField(fset, m, name); why != want {
			t.Errorf("%s: %q, want %q", name, why, want)
		}
	}
}
