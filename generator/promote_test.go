package generator

import (
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"testing"
)

const promoteSrc = `package p

type Keyed struct{}
func (Keyed) PartitionKey() (string, error) { return "", nil }

type PtrKeyed struct{}
func (*PtrKeyed) PartitionKey() (string, error) { return "", nil }

type Iface interface{ PartitionKey() (string, error) }

type Own struct{ Keyed }
func (Own) PartitionKey() (string, error) { return "", nil }

type Value struct{ Keyed }
type Pointer struct{ *PtrKeyed }
type ViaIface struct{ Iface }
type Deep struct{ Value }
type Both struct {
	Keyed
	PtrKeyed
}
type Shallow struct {
	Deep
	Keyed
}
type Field struct {
	Keyed
	PartitionKey int
}
type WrapA struct{ Keyed }
type WrapB struct{ Keyed }
type Twice struct {
	WrapA
	WrapB
}
type Loop struct{ *Loop; Keyed }
type Loop2 struct{ *Loop2 }

// Placed is a marked partitioned message: seqgen will write its
// PartitionKey. Audited embeds it; Shadowed also embeds a hand-written
// one at the same depth; Nearer holds a field of that name nearer.
type Placed struct{ ID string }
type Audited struct{ *Placed }
type Shadowed struct {
	Placed
	Keyed
}
type Nearer struct {
	Placed
	Inner struct{}
	Holder
}
type Holder struct{ Deep }
type TwoLevels struct{ Audited }
`

// TestLookup checks promotion against go/types where seqgen writes nothing
// (the names must agree, found or not), then with the PartitionKey seqgen
// writes on Placed counted as declared.
func TestLookup(t *testing.T) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "p.go", promoteSrc, 0)
	if err != nil {
		t.Fatal(err)
	}
	pkg, err := (&types.Config{Importer: importer.Default()}).Check("p", fset, []*ast.File{f}, nil)
	if err != nil {
		t.Fatal(err)
	}
	named := func(name string) *types.Named { return pkg.Scope().Lookup(name).Type().(*types.Named) }
	placed := &message{name: "Placed", named: named("Placed"), category: "orders"}
	c := &checker{
		m:     &model{msgs: map[string]*message{"p.Placed": placed}},
		plan:  &plan{partition: map[*message]*field{placed: {}}},
		decls: map[string][]*keyDecl{},
	}

	for _, name := range []string{"Own", "Value", "Pointer", "ViaIface", "Deep", "Both", "Shallow", "Field", "Twice", "Loop", "Loop2", "Holder"} {
		n := named(name)
		want, _, _ := types.LookupFieldOrMethod(n, true, pkg, "PartitionKey")
		if _, isField := want.(*types.Var); isField {
			want = nil
		}
		got := c.lookup(n, "PartitionKey")
		switch {
		case want == nil && got != nil:
			t.Errorf("%s: lookup found %v through %s; go/types finds no method", name, got.fn, pathString(got.path))
		case want != nil && (got == nil || got.fn != want):
			t.Errorf("%s: lookup = %+v, want %v", name, got, want)
		}
	}

	tests := []struct {
		typ  string
		gen  bool   // found the method seqgen writes on Placed
		path string // through these fields
	}{
		{"Placed", true, ""},
		{"Audited", true, "Placed"},
		{"TwoLevels", true, "Audited.Placed"},
		{"Shadowed", false, ""}, // Placed's and Keyed's hide each other
		{"Nearer", true, "Placed"},
	}
	for _, tt := range tests {
		got := c.lookup(named(tt.typ), "PartitionKey")
		if !tt.gen {
			if got != nil {
				t.Errorf("%s: lookup found %+v; want none", tt.typ, got)
			}
			continue
		}
		if got == nil || got.gen != placed || pathString(got.path) != tt.path {
			t.Errorf("%s: lookup = %+v; want Placed's generated method through %q", tt.typ, got, tt.path)
		}
	}
	if got := c.lookup(named("Audited"), "SeqbyUnpartitioned"); got != nil {
		t.Errorf("Audited: SeqbyUnpartitioned found %+v; seqgen writes it on no type here", got)
	}
}
