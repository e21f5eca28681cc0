package generator

import (
	"fmt"
	"go/token"
	"go/types"
	"path/filepath"

	"github.com/seqby/seqby/annotations"
)

// The runtime tells a message's partitioning by its method set: a
// PartitionKey() (string, error) makes it partitioned, SeqbyUnpartitioned()
// says seqgen wrote its category unpartitioned, and a message with both is
// refused at every publish. seqgen writes one of the two on each marked
// type, so the other must not reach the type through Go's promotion, from a
// method declared by hand or from one seqgen is about to write on an
// embedded marked message. The methods seqgen writes do not exist while it
// runs (its own output is hidden), so go/types cannot see them: promotion
// here walks Go's selector rules with them counted as declared.

// promoted is where a method name of a message type's method set comes
// from: a method declared on a type (fn) or written by seqgen on a marked
// message (gen), reached through the embedded fields path (empty when it
// is on the type itself).
type promoted struct {
	path []*types.Var
	fn   *types.Func
	gen  *message
	pos  token.Pos // the declaration, for gen the type's name
}

// generates reports whether seqgen writes method name on n: the methods of
// a marked message (StreamCategory, and PartitionKey or SeqbyUnpartitioned
// by its category) and a handler's SeqbyRegistration.
func (c *checker) generates(n *types.Named, name string) *message {
	if n.Obj().Pkg() == nil || n.TypeArgs().Len() > 0 {
		return nil
	}
	msg := c.m.msgs[n.Obj().Pkg().Path()+"."+n.Obj().Name()]
	if msg == nil || msg.alias {
		return nil // an alias gets a function, not methods
	}
	switch name {
	case "StreamCategory":
		return msg
	case "PartitionKey":
		if c.plan.partition[msg] != nil {
			return msg
		}
	case "SeqbyUnpartitioned":
		if c.unpartitioned(msg) {
			return msg
		}
	}
	return nil
}

// unpartitioned reports whether seqgen writes SeqbyUnpartitioned on msg:
// no declaration partitions its category.
func (c *checker) unpartitioned(msg *message) bool {
	return c.plan.partition[msg] == nil && len(c.decls[msg.category]) == 0
}

// lookup finds method name in the method set of *T, T being t, by Go's
// rules: the shallowest depth that has the name wins, and two at that
// depth hide each other (a field of that name hides a method too). It
// returns nil when the name is absent, a field, or ambiguous.
func (c *checker) lookup(t *types.Named, name string) *promoted {
	current := []embedded{{t: t}}
	seen := map[*types.Named]bool{}
	for len(current) > 0 {
		var next []embedded
		var found *promoted
		count := 0
		for _, e := range current {
			typ := types.Unalias(e.t)
			if n, ok := typ.(*types.Named); ok {
				if seen[n] {
					continue // shadowed by itself at a shallower depth
				}
				seen[n] = true
				if msg := c.generates(n, name); msg != nil {
					found, count = &promoted{path: e.path, gen: msg, pos: msg.pos}, count+1
					if e.multiples {
						count++
					}
					continue
				}
				if fn := declaredMethod(n, name); fn != nil {
					found, count = &promoted{path: e.path, fn: fn, pos: fn.Pos()}, count+1
					if e.multiples {
						count++
					}
					continue
				}
				typ = n.Underlying()
			}
			switch u := typ.(type) {
			case *types.Struct:
				for i := range u.NumFields() {
					f := u.Field(i)
					if f.Name() == name {
						found, count = nil, count+1 // a field: no method
						if e.multiples {
							count++
						}
						continue
					}
					if f.Embedded() {
						ft := types.Unalias(f.Type())
						if p, ok := ft.(*types.Pointer); ok {
							ft = p.Elem()
						}
						path := append(append([]*types.Var{}, e.path...), f)
						next = append(next, embedded{t: ft, path: path, multiples: e.multiples})
					}
				}
			case *types.Interface:
				for i := range u.NumMethods() {
					if fn := u.Method(i); fn.Name() == name {
						found, count = &promoted{path: e.path, fn: fn, pos: fn.Pos()}, count+1
						if e.multiples {
							count++
						}
					}
				}
			}
		}
		switch {
		case count > 1:
			return nil // ambiguous: Go leaves the name out
		case count == 1:
			return found
		}
		current = consolidate(next)
	}
	return nil
}

// embedded is a type lookup searches at some depth, reached through path.
type embedded struct {
	t         types.Type
	path      []*types.Var
	multiples bool // reached along more than one path at this depth
}

// consolidate merges the entries of one depth that reach one type, marking
// it reached more than once, as go/types does.
func consolidate(list []embedded) []embedded {
	var out []embedded
	for _, e := range list {
		merged := false
		for i := range out {
			if types.Identical(types.Unalias(out[i].t), types.Unalias(e.t)) {
				out[i].multiples, merged = true, true
				break
			}
		}
		if !merged {
			out = append(out, e)
		}
	}
	return out
}

func declaredMethod(n *types.Named, name string) *types.Func {
	for i := range n.NumMethods() {
		if fn := n.Method(i); fn.Name() == name {
			return fn
		}
	}
	return nil
}

// isRuntimeMethod reports whether fn has the signature the runtime's
// interface of that name asks for: runtime.Partitioned's PartitionKey()
// (string, error) or runtime.Unpartitioned's SeqbyUnpartitioned(). A
// method of another signature is not the runtime's, and is left alone.
func isRuntimeMethod(fn *types.Func) bool {
	sig := fn.Type().(*types.Signature)
	res := sig.Results()
	if sig.Params().Len() != 0 {
		return false
	}
	switch fn.Name() {
	case "PartitionKey":
		return res.Len() == 2 && types.Identical(res.At(0).Type(), types.Typ[types.String]) &&
			types.Identical(res.At(1).Type(), types.Universe.Lookup("error").Type())
	case "SeqbyUnpartitioned":
		return res.Len() == 0
	}
	return false
}

// partitioning refuses a message whose method set would hold both
// PartitionKey and SeqbyUnpartitioned: seqgen writes one of them on the
// type, and the other reaches it from a method declared by hand (on the
// type or promoted), or from one seqgen writes on an embedded marked
// message. Every publish of the message would fail.
func (c *checker) partitioning(msg *message) {
	switch {
	case msg.alias:
		return // seqgen writes a function: the aliased type's methods are its own
	case c.plan.partition[msg] != nil:
		c.against(msg, "SeqbyUnpartitioned")
	case c.unpartitioned(msg):
		c.against(msg, "PartitionKey")
	}
}

// against refuses msg if method other, the one seqgen does not write on
// it, is in its method set.
func (c *checker) against(msg *message, other string) {
	p := c.lookup(msg.named, other)
	if p == nil || p.fn != nil && !isRuntimeMethod(p.fn) {
		return
	}
	if p.gen != nil || len(p.path) > 0 && c.writtenBySeqgen(p.fn) {
		c.promotedGenerated(msg, p, other)
		return
	}
	from, fix := "", "rename the method"
	if len(p.path) > 0 {
		from = fmt.Sprintf(" (promoted from embedded field %s)", pathString(p.path))
		fix += ", or " + nameField(msg, p.path[0]) + " so that it is not promoted"
	}
	if other == "PartitionKey" {
		c.probs.addRelated(msg.pos, fmt.Sprintf("%s %s has a method PartitionKey() (string, error)%s, but category %q is not partitioned: seqgen writes SeqbyUnpartitioned on %s, so every publish of %s would fail; %s, or partition the category with %skey=FIELD (seqgen then writes PartitionKey)",
			msg.kind, msg.name, from, msg.category, msg.name, msg.name, fix, annotations.Prefix),
			related{p.pos, "PartitionKey declared here"})
		return
	}
	c.probs.addRelated(msg.pos, fmt.Sprintf("%s %s has a method SeqbyUnpartitioned()%s, which marks a message of a category that is not partitioned, but category %q is partitioned and seqgen writes PartitionKey on %s, so every publish of %s would fail; %s",
		msg.kind, msg.name, from, msg.category, msg.name, msg.name, fix),
		related{p.pos, "SeqbyUnpartitioned declared here"})
}

// writtenBySeqgen reports whether fn is declared in a seqby_gen.go seqgen
// wrote: a marked message of another module, generated there already.
func (c *checker) writtenBySeqgen(fn *types.Func) bool {
	if fn == nil || !fn.Pos().IsValid() {
		return false
	}
	name := c.probs.fset.Position(fn.Pos()).Filename
	return filepath.Base(name) == GenFile && isOwnOutput(name)
}

// nameField is the fix "name the field (F T; ...)" for embedded field f of
// msg: it stops the promotion but changes the message's JSON.
func nameField(msg *message, f *types.Var) string {
	qual := func(pkg *types.Package) string {
		if pkg == msg.pkg.Types {
			return ""
		}
		return pkg.Name()
	}
	return fmt.Sprintf("name the embedded field (%s %s; its fields then nest in the JSON)", f.Name(), types.TypeString(f.Type(), qual))
}

// promotedGenerated refuses msg for a method seqgen writes on an embedded
// marked message (p.gen, or one of another module, already generated),
// which would be promoted beside msg's own.
func (c *checker) promotedGenerated(msg *message, p *promoted, method string) {
	first := p.path[0]
	innerName, innerDesc := "", ""
	rel := []related{{first.Pos(), first.Name() + " embedded here"}}
	partitioned := "partitioned"
	if method == "SeqbyUnpartitioned" {
		partitioned = "unpartitioned"
	}
	if inner := p.gen; inner != nil {
		innerName = inner.name
		innerDesc = fmt.Sprintf("%s %s of %s category %q", article(inner.kind), inner.kind, partitioned, inner.category)
		rel = append(rel, related{inner.rolePos, fmt.Sprintf("%s %s declared here", inner.kind, inner.name)})
	} else {
		recv := p.fn.Type().(*types.Signature).Recv().Type()
		if ptr, ok := types.Unalias(recv).(*types.Pointer); ok {
			recv = ptr.Elem()
		}
		innerName = types.TypeString(recv, func(*types.Package) string { return "" })
		innerDesc = fmt.Sprintf("a message of a %s category, generated in package %s", partitioned, p.fn.Pkg().Name())
		rel = append(rel, related{p.fn.Pos(), method + " written here"})
	}
	own, fix := "the SeqbyUnpartitioned it writes on "+msg.name+" for unpartitioned category",
		fmt.Sprintf("partition %q with %skey=FIELD, which gives %s a PartitionKey of its own", msg.category, annotations.Prefix, msg.name)
	if method == "SeqbyUnpartitioned" {
		own = "the PartitionKey it writes on " + msg.name + " for partitioned category"
		fix = fmt.Sprintf("partition %s's category too, which gives %s a PartitionKey in place of SeqbyUnpartitioned", innerName, innerName)
		if p.gen != nil {
			fix = fmt.Sprintf("partition %q too, which gives %s a PartitionKey in place of SeqbyUnpartitioned", p.gen.category, innerName)
		}
	}
	c.probs.addRelated(msg.pos, fmt.Sprintf("%s %s embeds %s (field %s), %s, so the %s seqgen writes on %s would be promoted to %s, beside %s %q: every publish of %s would fail; embed an unmarked struct holding the fields %s shares with %s instead (the JSON stays the same), or %s, or %s",
		msg.kind, msg.name, innerName, pathString(p.path), innerDesc, method, innerName, msg.name, own, msg.category, msg.name,
		msg.name, innerName, nameField(msg, first), fix), rel...)
}
