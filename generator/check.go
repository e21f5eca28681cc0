package generator

import (
	"fmt"
	"go/token"
	"go/types"
	"sort"
	"strings"

	"github.com/seqby/seqby/annotations"
)

// plan is what the checks settle for emitting: how each partitioned
// message is keyed and how each pm method correlates.
type plan struct {
	partition     map[*message]*field
	partitionName map[string]string // category → JSON name of its key field
	correlate     map[*handleMethod]*field
}

// keyDecl is one declaration that a category is partitioned by a field: a
// key marker on a message, a keyed handler, or a sequential pm's correlate.
type keyDecl struct {
	pos    token.Pos
	name   string // the field as written
	who    string // e.g. "handler Shipping"
	pm     bool
	fields map[*message]*field
}

type checker struct {
	m     *model
	probs *problems
	plan  *plan
	// reported remembers messages whose key or correlate field was already
	// refused, so one mistake gives one error.
	reported map[*message]bool
	decls    map[string][]*keyDecl // by category
}

func check(m *model, probs *problems) *plan {
	c := &checker{m: m, probs: probs, reported: map[*message]bool{}, decls: map[string][]*keyDecl{},
		plan: &plan{partition: map[*message]*field{}, partitionName: map[string]string{}, correlate: map[*handleMethod]*field{}}}
	c.typeNames()
	for _, msg := range sortedMessages(m) {
		c.messageKey(msg)
	}
	for _, h := range m.handlers {
		c.handlerMethods(h)
	}
	cats := make([]string, 0, len(m.byCategory))
	for cat := range m.byCategory {
		cats = append(cats, cat)
	}
	sort.Strings(cats)
	for _, cat := range cats {
		c.category(cat)
	}
	c.generatedNames()
	c.platformFields()
	c.aliasKeyAccess()
	c.correlateAccess()
	c.groupNames()
	return c.plan
}

func sortedMessages(m *model) []*message {
	var out []*message
	for _, ms := range m.byCategory {
		out = append(out, ms...)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].qualified() < out[j].qualified() })
	return out
}

func (c *checker) refuse(msg *message)       { c.reported[msg] = true }
func (c *checker) refused(msg *message) bool { return c.reported[msg] }

// typeNames refuses two message types of one category with one Go name:
// the name is the wire type that picks the decoder.
func (c *checker) typeNames() {
	for cat, ms := range c.m.byCategory {
		seen := map[string]*message{}
		for _, msg := range ms {
			if first, ok := seen[msg.wire()]; ok {
				what := "so rename one"
				if msg.alias || first.alias {
					what = "so rename one or, for a type you do not own, declare it in another category"
				}
				c.probs.addRelated(msg.rolePos, fmt.Sprintf("%s %s and %s are both named %s in category %q; the Go type name identifies a message in its stream, %s",
					msg.kind, msg.qualified(), first.qualified(), msg.wire(), cat, what),
					related{first.rolePos, first.declaredAs() + " here"})
				continue
			}
			seen[msg.wire()] = msg
		}
	}
}

// generatedNames refuses user declarations that would collide with the
// methods seqgen writes: the generated file would not compile.
func (c *checker) generatedNames() {
	// Only a field or method of the type itself collides: the method seqgen
	// writes hides a promoted one (check.partitioning judges those).
	taken := func(n *types.Named, name string) types.Object {
		obj, index, _ := types.LookupFieldOrMethod(n, true, n.Obj().Pkg(), name)
		if len(index) != 1 {
			return nil
		}
		return obj
	}
	for _, msg := range sortedMessages(c.m) {
		if msg.alias {
			if obj := msg.pkg.Types.Scope().Lookup(msg.foreignFunc()); obj != nil {
				c.probs.addRelated(msg.pos, fmt.Sprintf("package %s already declares %s, the function seqgen writes for alias %s; rename it", msg.pkg.Name, msg.foreignFunc(), msg.name),
					related{obj.Pos(), msg.foreignFunc() + " declared here"})
			}
			continue
		}
		names := []string{"StreamCategory"}
		if c.plan.partition[msg] != nil {
			names = append(names, "PartitionKey")
		} else if c.unpartitioned(msg) {
			names = append(names, "SeqbyUnpartitioned")
		}
		c.partitioning(msg)
		for _, name := range names {
			if obj := taken(msg.named, name); obj != nil {
				c.probs.addRelated(msg.pos, fmt.Sprintf("%s %s already has a %s named %s, which seqgen writes; rename it", msg.kind, msg.name, objKind(obj), name),
					related{obj.Pos(), name + " declared here"})
			}
		}
	}
	for _, h := range c.m.handlers {
		if obj := taken(h.named, "SeqbyRegistration"); obj != nil {
			c.probs.addRelated(h.pos, fmt.Sprintf("%s already has a %s named SeqbyRegistration, which seqgen writes; rename it", h.describe(), objKind(obj)),
				related{obj.Pos(), "SeqbyRegistration declared here"})
		}
	}
}

// platformFields refuses a key or correlate field declared, or of a type
// declared, in a file with a build constraint (an embedded field on the way
// included): seqby_gen.go converts the field to a string the way the
// platform seqgen ran on declares it, so another platform could see other
// code, or none that builds.
func (c *checker) platformFields() {
	for _, msg := range sortedMessages(c.m) {
		f := c.plan.partition[msg]
		if f == nil {
			continue
		}
		pos := msg.keyPos
		if !pos.IsValid() {
			pos = msg.pos
		}
		c.platformField(pos, msg, f, fmt.Sprintf("the key of category %q", msg.category))
	}
	for _, h := range c.m.handlers {
		for _, hm := range h.methods {
			if f := c.plan.correlate[hm]; f != nil {
				c.platformField(hm.correlatePos, hm.msg, f, fmt.Sprintf("the correlate field of %s.%s", h.name, hm.name))
			}
		}
	}
}

func (c *checker) platformField(pos token.Pos, msg *message, f *field, role string) {
	at := func(p token.Pos) string {
		name := c.probs.fset.Position(p).Filename
		if why, ok := c.m.constrained[name]; ok {
			return why
		}
		return c.m.fileConstraint(name)
	}
	for _, v := range f.path {
		what, why := "field "+v.Name(), at(v.Pos())
		if why == "" {
			t := types.Unalias(v.Type())
			if p, ok := t.(*types.Pointer); ok {
				t = types.Unalias(p.Elem())
			}
			if n, ok := t.(*types.Named); ok {
				what, why = "type "+typeString(n), at(n.Obj().Pos())
			}
		}
		if why != "" {
			// The file is not named: on another platform it may be another.
			fix := "declare it in a file without build constraints"
			if msg.alias {
				fix += ", or, for a type you do not own, use another field"
			}
			c.probs.add(pos, "%s.%s, %s, depends on %s, which is declared in a file with a build constraint; seqby_gen.go has none and would read it as the platform seqgen runs on declares it: %s",
				msg.name, pathString(f.path), role, what, fix)
			return
		}
	}
}

// aliasKeyAccess refuses the partition key of an aliased type where
// generated code cannot name it: an aliased type has no PartitionKey
// method, so Seqby<Alias> (in the alias's package) and every handler
// route (in the handler's package) read the field themselves.
func (c *checker) aliasKeyAccess() {
	refuse := func(pos token.Pos, msg *message, f *field, pkg *types.Package, rel ...related) {
		c.probs.addRelated(pos, fmt.Sprintf("the key of category %q, %s.%s, is reached through an unexported embedded field, which package %s cannot name; seqgen reads an aliased type's key where it is used, so key the category by a field %s declares directly or through exported embedded types",
			msg.category, msg.wire(), pathString(f.path), pkg.Name(), msg.wire()), rel...)
	}
	for _, msg := range sortedMessages(c.m) {
		f := c.plan.partition[msg]
		if !msg.alias || f == nil {
			continue
		}
		if !reachable(msg.named, f, msg.pkg.Types) {
			pos := msg.keyPos
			if !pos.IsValid() {
				pos = msg.rolePos
			}
			refuse(pos, msg, f, msg.pkg.Types)
			continue
		}
		for _, h := range c.m.handlers {
			for _, hm := range h.methods {
				if hm.msg == msg && !reachable(msg.named, f, h.pkg.Types) {
					refuse(hm.pos, msg, f, h.pkg.Types, related{msg.rolePos, "alias " + msg.name + " declared here"})
				}
			}
		}
	}
}

// correlateAccess refuses a pm correlate field that the pm's package cannot
// name: the generated Correlate function reads it directly, from there.
func (c *checker) correlateAccess() {
	for _, h := range c.m.handlers {
		for _, hm := range h.methods {
			f := c.plan.correlate[hm]
			if f == nil || reachable(hm.msg.named, f, h.pkg.Types) {
				continue
			}
			c.probs.addRelated(hm.correlatePos, fmt.Sprintf("%scorrelate=%s on %s.%s: %s.%s is reached through an unexported embedded field, which package %s cannot name; embed an exported type or declare the field directly",
				annotations.Prefix, hm.correlate, h.name, hm.name, hm.msg.name, pathString(f.path), h.pkg.Name),
				related{hm.msg.pos, hm.msg.name + " declared here"})
		}
	}
}

// groupNames refuses two handlers of the module with one name: they would
// share a consumer group, each reading only part of its categories. The
// later one (by position) is reported, with the first beneath.
func (c *checker) groupNames() {
	at := func(h *handler) token.Pos {
		if h.namePos.IsValid() {
			return h.namePos
		}
		return h.pos
	}
	hs := append([]*handler(nil), c.m.handlers...)
	sort.SliceStable(hs, func(i, j int) bool { return c.probs.before(at(hs[i]), at(hs[j])) })
	seen := map[string]*handler{}
	for _, h := range hs {
		name := h.groupName()
		first, ok := seen[name]
		if !ok {
			seen[name] = h
			continue
		}
		c.probs.addRelated(at(h), fmt.Sprintf("%s and %s are both named %q; the name is the consumer group, so give each handler its own %sname",
			h.qualified(), first.qualified(), name, annotations.Prefix),
			related{at(first), first.qualified() + " here"})
	}
}

func objKind(obj types.Object) string {
	if _, ok := obj.(*types.Func); ok {
		return "method"
	}
	return "field"
}

// messageKey checks a //seqby:key on a message type against the type itself.
func (c *checker) messageKey(msg *message) {
	if msg.key == "" {
		return
	}
	f, why := resolveField(c.probs.fset, msg.named, msg.key)
	if f == nil {
		c.probs.add(msg.keyPos, "%skey=%s on %s %s: %s", annotations.Prefix, msg.key, msg.kind, msg.name, why)
		c.refuse(msg)
		return
	}
	c.addDecl(msg.category, &keyDecl{pos: msg.keyPos, name: msg.key, who: msg.kind + " " + msg.name}, msg, f)
}

func (c *checker) addDecl(cat string, d *keyDecl, msg *message, f *field) {
	for _, old := range c.decls[cat] {
		if old.pos == d.pos {
			old.fields[msg] = f
			return
		}
	}
	d.fields = map[*message]*field{msg: f}
	c.decls[cat] = append(c.decls[cat], d)
}

// handlerMethods runs checks 2, 5 and 6 on one handler.
func (c *checker) handlerMethods(h *handler) {
	if len(h.methods) == 0 {
		if h.refusedMethods {
			return
		}
		want := "an event"
		if h.kind == annotations.CommandHandler {
			want = "a command"
		}
		c.probs.addRelated(h.rolePos, fmt.Sprintf("%s has no handle methods; declare exported methods func (%s) Name(context.Context, M) error with M %s type (or *M)",
			h.describe(), h.name, want), h.nearMisses...)
		return
	}
	handled := map[*message]*handleMethod{}
	for _, hm := range h.methods {
		if first, ok := handled[hm.msg]; ok {
			c.probs.addRelated(hm.pos, fmt.Sprintf("%s.%s and %s.%s both handle %s; keep one handle method per message type", h.name, first.name, h.name, hm.name, hm.msg.name),
				related{first.pos, h.name + "." + first.name + " here"})
			continue
		}
		handled[hm.msg] = hm
		switch {
		case h.kind == annotations.PM:
			c.pmMethod(h, hm)
		case h.key != "":
			c.keyedMethod(h, hm)
		}
	}
}

func (c *checker) keyedMethod(h *handler, hm *handleMethod) {
	f, why := resolveField(c.probs.fset, hm.msg.named, h.key)
	if f == nil {
		c.probs.addRelated(h.keyPos, fmt.Sprintf("%s is keyed by %s, but %s", h.describe(), h.key, why),
			related{hm.pos, fmt.Sprintf("%s.%s handles %s here", h.name, hm.name, hm.msg.name)},
			related{hm.msg.pos, hm.msg.name + " declared here"})
		c.refuse(hm.msg)
		return
	}
	c.addDecl(hm.msg.category, &keyDecl{pos: h.keyPos, name: h.key, who: h.describe()}, hm.msg, f)
}

func (c *checker) pmMethod(h *handler, hm *handleMethod) {
	if hm.correlate == "" {
		c.probs.add(hm.pos, "pm %s: handle method %s needs %scorrelate=FIELD naming the field of %s that selects the pm instance",
			h.name, hm.name, annotations.Prefix, hm.msg.name)
		return
	}
	f, why := resolveField(c.probs.fset, hm.msg.named, hm.correlate)
	if f == nil {
		c.probs.addRelated(hm.correlatePos, fmt.Sprintf("%scorrelate=%s on %s.%s: %s", annotations.Prefix, hm.correlate, h.name, hm.name, why),
			related{hm.msg.pos, hm.msg.name + " declared here"})
		c.refuse(hm.msg)
		return
	}
	c.plan.correlate[hm] = f
	if h.sequential {
		c.addDecl(hm.msg.category, &keyDecl{pos: hm.correlatePos, name: hm.correlate, pm: true,
			who: fmt.Sprintf("sequential pm %s via %s", h.name, hm.name)}, hm.msg, f)
	}
}

// category runs checks 3, 4 and 5 for one category: every key declaration
// agrees, and every message type carries the key.
func (c *checker) category(cat string) {
	decls := c.decls[cat]
	if len(decls) == 0 {
		return
	}
	sort.Slice(decls, func(i, j int) bool { return c.probs.before(decls[i].pos, decls[j].pos) })
	msgs := c.m.byCategory[cat]
	for _, d := range decls {
		for _, msg := range msgs {
			if _, ok := d.fields[msg]; !ok {
				if f, _ := resolveField(c.probs.fset, msg.named, d.name); f != nil {
					d.fields[msg] = f
				}
			}
		}
	}
	first := decls[0]
	var conflicting []*keyDecl
	for _, d := range decls[1:] {
		if !agree(first, d, msgs) {
			conflicting = append(conflicting, d)
		}
	}
	if len(conflicting) > 0 {
		c.conflict(cat, first, conflicting, decls)
		return
	}
	for _, msg := range msgs {
		if f := first.fields[msg]; f != nil {
			c.plan.partition[msg] = f
			continue
		}
		if c.refused(msg) {
			continue
		}
		_, why := resolveField(c.probs.fset, msg.named, first.name)
		c.probs.addRelated(msg.pos, fmt.Sprintf("%s %s is in category %q, which is partitioned by %s, but %s; the publisher routes every message of a partitioned category by its key",
			msg.kind, msg.name, cat, first.name, why),
			related{first.pos, fmt.Sprintf("%s partitions %q by %s here", first.who, cat, first.name)})
	}
	if f := c.plan.partition[msgs[0]]; f != nil {
		c.plan.partitionName[cat] = f.jsonName
	} else {
		for _, msg := range msgs {
			if f := c.plan.partition[msg]; f != nil {
				c.plan.partitionName[cat] = f.jsonName
				break
			}
		}
	}
}

// agree reports whether two declarations resolve to the same field on
// every message type of the category. A type where neither resolves is
// check 4's to report; a type where one resolves and the other does not is
// a disagreement, since the category would be keyed two ways.
func agree(a, b *keyDecl, msgs []*message) bool {
	for _, msg := range msgs {
		fa, fb := a.fields[msg], b.fields[msg]
		if (fa == nil) != (fb == nil) || (fa != nil && fa.v != fb.v) {
			return false
		}
	}
	return true
}

func (c *checker) conflict(cat string, first *keyDecl, conflicting, all []*keyDecl) {
	// Group the declarations by the field they name, so the message reads
	// "client_id (handler A, event B) and tenant_id (handler C)".
	var groups [][]*keyDecl
	for _, d := range all {
		placed := false
		for i, g := range groups {
			if agree(g[0], d, c.m.byCategory[cat]) {
				groups[i], placed = append(g, d), true
				break
			}
		}
		if !placed {
			groups = append(groups, []*keyDecl{d})
		}
	}
	var names []string
	for _, g := range groups {
		var who []string
		for _, d := range g {
			who = append(who, d.who)
		}
		names = append(names, fmt.Sprintf("%s (%s)", g[0].name, strings.Join(who, ", ")))
	}
	var rel []related
	for _, d := range all[1:] {
		rel = append(rel, related{d.pos, fmt.Sprintf("%s partitions %q by %s here", d.who, cat, d.name)})
	}
	pm := first.pm
	for _, d := range conflicting {
		pm = pm || d.pm
	}
	rule := "the key belongs to the category, so every keyed handler and key marker on it must name the same field"
	if pm {
		rule = "a sequential pm partitions each category it handles by its correlate field there, so every other keyed handler and key marker on it must use that field"
	}
	c.probs.addRelated(first.pos, fmt.Sprintf("category %q is partitioned by conflicting keys %s; %s", cat, strings.Join(names, " and "), rule), rel...)
}
