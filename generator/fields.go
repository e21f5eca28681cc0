package generator

import (
	"fmt"
	"go/token"
	"go/types"
	"reflect"
	"strings"
)

// field is a key or correlate field resolved on one message type.
type field struct {
	v        *types.Var
	path     []*types.Var // from the message struct down to v
	jsonName string
	conv     conversion
}

// conversion says how a key field becomes a string.
type conversion uint8

const (
	convString   conversion = iota + 1 // string kinds: string(v)
	convInt                            // signed integers: strconv.FormatInt
	convUint                           // unsigned integers: strconv.FormatUint
	convStringer                       // fmt.Stringer: v.String()
)

// nullable reports whether the field can be nil (a pointer or interface),
// which is a null key.
func (f *field) nullable() bool {
	switch types.Unalias(f.v.Type()).Underlying().(type) {
	case *types.Pointer, *types.Interface:
		return true
	}
	return false
}

// candidate is a field visible to encoding/json at some depth.
type candidate struct {
	v        *types.Var
	path     []*types.Var
	jsonName string
	viaPtr   bool // reached through an embedded pointer
}

// resolveField finds name on struct type t the way encoding/json sees
// fields: first by JSON name, else by Go name; the shallowest match wins;
// two matches at one depth are ambiguous. It returns a message fit for an
// error when the field cannot serve as a key; fset (nil in some tests)
// lets it name an undefined type as its declaration writes it.
func resolveField(fset *token.FileSet, t *types.Named, name string) (*field, string) {
	st, ok := t.Underlying().(*types.Struct)
	if !ok {
		return nil, fmt.Sprintf("%s is not a struct", t.Obj().Name())
	}
	levels := visibleFields(st)
	for _, byGo := range []bool{false, true} {
		for _, level := range levels {
			var hits []candidate
			for _, c := range level {
				if (!byGo && c.jsonName == name) || (byGo && c.v.Name() == name) {
					hits = append(hits, c)
				}
			}
			switch {
			case len(hits) > 1:
				return nil, fmt.Sprintf("field %s of %s is ambiguous: %s and %s are at the same depth", name, t.Obj().Name(), pathString(hits[0].path), pathString(hits[1].path))
			case len(hits) == 1:
				c := hits[0]
				if c.viaPtr {
					return nil, fmt.Sprintf("field %s of %s is reached through an embedded pointer (%s), which can be nil; embed the struct by value", name, t.Obj().Name(), pathString(c.path))
				}
				if invalidType(c.v.Type()) {
					return nil, fmt.Sprintf("field %s of %s has %s, so it is not a valid key type; fix the type first", pathString(c.path), t.Obj().Name(), undefinedType(fset, c.v))
				}
				if example, bad := colonStringer(c.v.Type()); bad {
					return nil, fmt.Sprintf("field %s of %s has type %s, whose String form (such as %s) contains ':', which the key rules forbid; key by a string or integer field instead", pathString(c.path), t.Obj().Name(), typeString(c.v.Type()), example)
				}
				conv, why := keyConversion(c.v.Type())
				if why != "" {
					return nil, fmt.Sprintf("field %s of %s has type %s, which is not a valid key type (%s); use a string or integer kind, a fmt.Stringer, or a pointer to one", pathString(c.path), t.Obj().Name(), typeString(c.v.Type()), why)
				}
				if p := codecProblem(c.v.Type()); p != nil {
					return nil, p.explain(pathString(c.path), t.Obj().Name(), c.v.Type())
				}
				return &field{v: c.v, path: c.path, jsonName: c.jsonName, conv: conv}, ""
			}
		}
	}
	if why := hiddenField(t, st, name); why != "" {
		return nil, why
	}
	return nil, fmt.Sprintf("%s has no field %s%s", t.Obj().Name(), name, suggestField(levels, name))
}

// suggestField is " (did you mean NAME?)" for the field name, JSON or Go,
// nearest to name among the fields encoding/json sees, or "" when none is
// near enough to be a likely typo: an edit distance, ignoring case, of at
// most a third of name's length (at least 1). A tie goes to the name
// nearer with case, then to the shallower and earlier field.
func suggestField(levels [][]candidate, name string) string {
	best, bestD, bestCase := "", -1, 0
	limit := max(1, len([]rune(name))/3)
	lower := strings.ToLower(name)
	for _, level := range levels {
		for _, c := range level {
			for _, cand := range []string{c.jsonName, c.v.Name()} {
				d := editDistance(lower, strings.ToLower(cand))
				if d > limit {
					continue
				}
				if dc := editDistance(name, cand); bestD < 0 || d < bestD || d == bestD && dc < bestCase {
					best, bestD, bestCase = cand, d, dc
				}
			}
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %s?)", best)
}

// editDistance is the optimal string alignment distance of a and b, by
// runes: insertions, deletions, substitutions and swaps of neighbours
// ("acount_id" is 1 from "account_id"), as annotations.Suggest counts for
// marker names.
func editDistance(a, b string) int {
	x, y := []rune(a), []rune(b)
	d := make([][]int, len(x)+1)
	for i := range d {
		d[i] = make([]int, len(y)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(x); i++ {
		for j := 1; j <= len(y); j++ {
			cost := 1
			if x[i-1] == y[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && x[i-1] == y[j-2] && x[i-2] == y[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(x)][len(y)]
}

// codecIssue is why encoding/json cannot carry a key field's type: at
// (a path below the field as Go would write it after the field's name,
// ".Parts[i].Next", "" for the field itself) has type typ, which
// the codec cannot encode (a channel, function, complex number,
// unsafe.Pointer, a map with such keys) or decode into (an interface with
// methods: it cannot tell which concrete type to make).
type codecIssue struct {
	at     string
	typ    types.Type
	what   string // "a channel", "an interface", ...
	decode bool   // encoding works, decoding does not
}

// explain renders the refusal of field path of message msg, of type t.
func (p *codecIssue) explain(path, msg string, t types.Type) string {
	where := fmt.Sprintf("field %s of %s has type %s", path, msg, typeString(t))
	if p.at != "" {
		name := path[strings.LastIndex(path, ".")+1:]
		where += fmt.Sprintf(", and %s%s has type %s", name, p.at, typeString(p.typ))
	}
	why := fmt.Sprintf("the JSON codec cannot encode %s, so no %s could be published", p.what, msg)
	if p.decode {
		why = fmt.Sprintf("the JSON codec cannot decode into %s (it cannot tell which concrete type to make), so no %s could be decoded, and the engine reads keys from decoded messages", p.what, msg)
	}
	return fmt.Sprintf("%s: %s; key by a string or integer field, or by a concrete type the codec carries", where, why)
}

// codecProblem reports why encoding/json cannot carry values of t, nil
// when it can. It follows what the codec follows: pointers, elements of
// slices, arrays and maps, and the fields of structs it encodes (exported,
// not tagged "-", promoted from embedded structs). A type with its own
// JSON or text methods (MarshalJSON, UnmarshalText, ...) is trusted, an
// interface excepted: a nil interface field is decoded by its type alone.
func codecProblem(t types.Type) *codecIssue {
	return codecWalk(t, "", map[*types.Named]bool{})
}

var customCodecMethods = []string{"MarshalJSON", "UnmarshalJSON", "MarshalText", "UnmarshalText"}

func hasCustomCodec(t types.Type) bool {
	for _, name := range customCodecMethods {
		if obj, _, _ := types.LookupFieldOrMethod(t, true, nil, name); obj != nil {
			if _, ok := obj.(*types.Func); ok {
				return true
			}
		}
	}
	return false
}

func codecWalk(t types.Type, at string, seen map[*types.Named]bool) *codecIssue {
	t = types.Unalias(t)
	if n, ok := t.(*types.Named); ok {
		if seen[n] {
			return nil
		}
		seen[n] = true
	}
	u := t.Underlying()
	if iface, ok := u.(*types.Interface); ok {
		if iface.NumMethods() == 0 {
			return nil // decoded as a map, slice, string, number or bool
		}
		return &codecIssue{at: at, typ: t, what: "an interface", decode: true}
	}
	if hasCustomCodec(t) {
		return nil
	}
	elem := func(e types.Type, index string) *codecIssue {
		return codecWalk(e, at+"["+index+"]", seen)
	}
	switch u := u.(type) {
	case *types.Chan:
		return &codecIssue{at: at, typ: t, what: "a channel"}
	case *types.Signature:
		return &codecIssue{at: at, typ: t, what: "a function"}
	case *types.Basic:
		switch {
		case u.Info()&types.IsComplex != 0:
			return &codecIssue{at: at, typ: t, what: "a complex number"}
		case u.Kind() == types.UnsafePointer:
			return &codecIssue{at: at, typ: t, what: "an unsafe.Pointer"}
		}
	case *types.Pointer:
		return codecWalk(u.Elem(), at, seen)
	case *types.Slice:
		return elem(u.Elem(), "i")
	case *types.Array:
		return elem(u.Elem(), "i")
	case *types.Map:
		k := types.Unalias(u.Key())
		if b, ok := k.Underlying().(*types.Basic); !(ok && b.Info()&(types.IsString|types.IsInteger) != 0) && !hasCustomCodec(k) {
			return &codecIssue{at: at, typ: t, what: "a map keyed by " + typeString(k)}
		}
		return elem(u.Elem(), "k")
	case *types.Struct:
		for i := 0; i < u.NumFields(); i++ {
			f := u.Field(i)
			if reflect.StructTag(u.Tag(i)).Get("json") == "-" {
				continue
			}
			if !f.Exported() {
				if _, ok := derefStruct(f.Type()); !ok || !f.Embedded() {
					continue // not encoded
				}
			}
			if p := codecWalk(f.Type(), at+"."+f.Name(), seen); p != nil {
				return p
			}
		}
	}
	return nil
}

// hiddenField explains why name, which encoding/json does not see on t, is
// still a field of t: tagged "-", unexported, or nested in an embedded
// struct with a json tag. A key must travel in the message, since the
// engine reads it back from decoded messages; "" when t has no such field.
func hiddenField(t *types.Named, st *types.Struct, name string) string {
	type item struct {
		st     *types.Struct
		path   []*types.Var
		nested *types.Var // a json-tagged embedded field on the way
		tag    string
	}
	current := []item{{st: st}}
	visited := map[*types.Struct]bool{}
	for len(current) > 0 {
		var next []item
		for _, it := range current {
			if visited[it.st] {
				continue
			}
			visited[it.st] = true
			for i := 0; i < it.st.NumFields(); i++ {
				f := it.st.Field(i)
				tag := reflect.StructTag(it.st.Tag(i)).Get("json")
				jsonName, _, _ := strings.Cut(tag, ",")
				path := append(append([]*types.Var{}, it.path...), f)
				if f.Name() == name || jsonName == name {
					where := fmt.Sprintf("field %s of %s", pathString(path), t.Obj().Name())
					switch {
					case it.nested != nil && strings.HasPrefix(it.tag, "-") && !strings.HasPrefix(it.tag, "-,"):
						return fmt.Sprintf("%s is inside embedded field %s, which is tagged json:%q, so the JSON codec drops it with all its fields and the key could not be read back from a stored message; key by a field the message carries", where, it.nested.Name(), it.tag)
					case it.nested != nil:
						return fmt.Sprintf("%s is inside embedded field %s, which is tagged json:%q and so encoded as an object of its own; key by a field the message carries directly", where, it.nested.Name(), it.tag)
					case tag == "-":
						return fmt.Sprintf("%s is tagged json:\"-\", so the JSON codec does not carry it and the key could not be read back from a stored message; remove the tag or key by another field", where)
					case !f.Exported():
						return fmt.Sprintf("%s is unexported, so the JSON codec does not carry it and the key could not be read back from a stored message; export it or key by another field", where)
					}
				}
				if f.Embedded() {
					if est, ok := derefStruct(f.Type()); ok {
						nested, ntag := it.nested, it.tag
						if nested == nil && tag != "" {
							nested, ntag = f, tag
						}
						next = append(next, item{st: est, path: path, nested: nested, tag: ntag})
					}
				}
			}
		}
		current = next
	}
	return ""
}

// invalidType reports whether t, or what it points to, did not type-check
// (an undefined type, or one defined on an undefined type). go/types counts
// such a type as implementing every interface, fmt.Stringer included.
func invalidType(t types.Type) bool {
	t = types.Unalias(t)
	if p, ok := t.Underlying().(*types.Pointer); ok {
		t = types.Unalias(p.Elem())
	}
	return t.Underlying() == types.Typ[types.Invalid]
}

// colonStringers are the fmt.Stringers of the standard library whose
// String form contains ':' (always, or for common values), with an example:
// every such key breaks the key rules at publish time.
var colonStringers = map[string]string{
	"time.Time":          `"2009-11-10 23:00:00 +0000 UTC"`,
	"net.IP":             `"2001:db8::1"`,
	"net.IPNet":          `"2001:db8::/32"`,
	"net.HardwareAddr":   `"00:00:5e:00:53:01"`,
	"net.TCPAddr":        `"192.0.2.1:80"`,
	"net.UDPAddr":        `"192.0.2.1:53"`,
	"net/netip.Addr":     `"2001:db8::1"`,
	"net/netip.AddrPort": `"192.0.2.1:80"`,
	"net/netip.Prefix":   `"2001:db8::/32"`,
	"net/url.URL":        `"https://example.com/"`,
	"net/url.Userinfo":   `"user:password"`,
}

// colonStringer reports whether t (or what it points to) is one of
// colonStringers, with its example.
func colonStringer(t types.Type) (example string, ok bool) {
	t = types.Unalias(t)
	if p, isPtr := t.Underlying().(*types.Pointer); isPtr {
		t = types.Unalias(p.Elem())
	}
	n, isNamed := t.(*types.Named)
	if !isNamed || n.Obj().Pkg() == nil {
		return "", false
	}
	if example, ok = colonStringers[n.Obj().Pkg().Path()+"."+n.Obj().Name()]; ok {
		return example, true
	}
	// A struct embedding one (type Stamp struct{ time.Time }) has its
	// String method, promoted.
	obj, _, _ := types.LookupFieldOrMethod(n, true, n.Obj().Pkg(), "String")
	fn, isFunc := obj.(*types.Func)
	if !isFunc {
		return "", false
	}
	recv := types.Unalias(fn.Type().(*types.Signature).Recv().Type())
	if p, isPtr := recv.(*types.Pointer); isPtr {
		recv = types.Unalias(p.Elem())
	}
	if rn, isNamed := recv.(*types.Named); isNamed && rn != n && rn.Obj().Pkg() != nil {
		example, ok = colonStringers[rn.Obj().Pkg().Path()+"."+rn.Obj().Name()]
	}
	return example, ok
}

// visibleFields lists, depth by depth, the fields encoding/json would
// encode: exported, not tagged "-", promoted from untagged embedded structs.
func visibleFields(st *types.Struct) [][]candidate {
	type item struct {
		st     *types.Struct
		path   []*types.Var
		viaPtr bool
	}
	var levels [][]candidate
	current := []item{{st: st}}
	visited := map[*types.Struct]bool{}
	for len(current) > 0 {
		var level []candidate
		var next []item
		// A struct type embedded twice at one depth contributes its fields
		// once per path, so they collide as in encoding/json; a type seen
		// at a shallower depth is not explored again.
		for _, it := range current {
			if visited[it.st] {
				continue
			}
			for i := 0; i < it.st.NumFields(); i++ {
				f := it.st.Field(i)
				tag := reflect.StructTag(it.st.Tag(i)).Get("json")
				if tag == "-" {
					continue
				}
				jsonName, _, _ := strings.Cut(tag, ",")
				path := append(append([]*types.Var{}, it.path...), f)
				if f.Embedded() && jsonName == "" {
					ft, ptr := types.Unalias(f.Type()), false
					if p, ok := ft.Underlying().(*types.Pointer); ok {
						ft, ptr = types.Unalias(p.Elem()), true
					}
					if est, ok := ft.Underlying().(*types.Struct); ok {
						next = append(next, item{st: est, path: path, viaPtr: it.viaPtr || ptr})
						continue
					}
				}
				if !f.Exported() {
					continue
				}
				if jsonName == "" {
					jsonName = f.Name()
				}
				level = append(level, candidate{v: f, path: path, jsonName: jsonName, viaPtr: it.viaPtr})
			}
		}
		for _, it := range current {
			visited[it.st] = true
		}
		levels = append(levels, level)
		current = next
	}
	return levels
}

// keyConversion classifies a key field's type, in the order the rules give:
// string kinds by value, integer kinds with strconv (even with a String
// method: an enum's name may change, its value must not), other Stringers.
func keyConversion(t types.Type) (conversion, string) {
	t = types.Unalias(t)
	if p, ok := t.Underlying().(*types.Pointer); ok {
		elem := types.Unalias(p.Elem())
		if _, ok := elem.Underlying().(*types.Pointer); ok {
			return 0, "a pointer to a pointer"
		}
		if c := basicConversion(elem); c != 0 {
			return c, ""
		}
		if isStringer(t) {
			return convStringer, ""
		}
		return 0, "its element type is neither a string or integer kind nor a fmt.Stringer"
	}
	if c := basicConversion(t); c != 0 {
		return c, ""
	}
	if isStringer(t) || isStringer(types.NewPointer(t)) {
		return convStringer, ""
	}
	return 0, "neither a string or integer kind nor a fmt.Stringer"
}

func basicConversion(t types.Type) conversion {
	b, ok := t.Underlying().(*types.Basic)
	if !ok {
		return 0
	}
	switch {
	case b.Info()&types.IsString != 0:
		return convString
	case b.Info()&types.IsInteger != 0 && b.Info()&types.IsUnsigned != 0:
		return convUint
	case b.Info()&types.IsInteger != 0:
		return convInt
	}
	return 0
}

var stringer = func() *types.Interface {
	sig := types.NewSignatureType(nil, nil, nil, nil,
		types.NewTuple(types.NewVar(0, nil, "", types.Typ[types.String])), false)
	return types.NewInterfaceType([]*types.Func{types.NewFunc(0, nil, "String", sig)}, nil).Complete()
}()

func isStringer(t types.Type) bool { return types.Implements(t, stringer) }

func pathString(path []*types.Var) string {
	names := make([]string, len(path))
	for i, v := range path {
		names[i] = v.Name()
	}
	return strings.Join(names, ".")
}

func typeString(t types.Type) string {
	return types.TypeString(t, func(p *types.Package) string { return p.Name() })
}

// selectorPath is how code in package from reads f on a value of type t:
// the field's own name when Go's promotion reaches the same field (the
// usual case), else the full path through embedded fields. ok is false
// when neither can be written from there (an unexported embedded field of
// another package on the way).
func selectorPath(t *types.Named, f *field, from *types.Package) (names []string, ok bool) {
	if obj, _, _ := types.LookupFieldOrMethod(t, false, from, f.v.Name()); obj == f.v {
		return []string{f.v.Name()}, true
	}
	for _, v := range f.path {
		if !v.Exported() && v.Pkg() != from {
			return nil, false
		}
		names = append(names, v.Name())
	}
	return names, true
}

func reachable(t *types.Named, f *field, from *types.Package) bool {
	_, ok := selectorPath(t, f, from)
	return ok
}
