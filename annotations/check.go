package annotations

import (
	"fmt"
	"go/token"
	"strings"
	"unicode"
)

// Found is a marker with its position.
type Found struct {
	Marker
	Pos token.Pos
}

// Problem is one error about markers, at Pos, with optional related
// positions (for example the first of two duplicate markers).
type Problem struct {
	Pos     token.Pos
	Msg     string
	Related []Related
}

// Related is a secondary position of a Problem.
type Related struct {
	Pos token.Pos
	Msg string
}

// Set holds the valid markers of one declaration by name.
type Set map[string]Found

// Has reports whether the marker is present.
func (s Set) Has(name string) bool { _, ok := s[name]; return ok }

// Value returns the marker's value ("" when absent).
func (s Set) Value(name string) string { return s[name].Value }

// Check validates the markers found on one declaration of kind target and
// returns those that are valid. Markers with problems are left out of the
// Set, so later checks do not report them again.
func Check(target Target, found []Found) (Set, []Problem) {
	set := Set{}
	var probs []Problem
	bad := func(f Found, format string, args ...any) {
		probs = append(probs, Problem{Pos: f.Pos, Msg: fmt.Sprintf(format, args...)})
	}
	if MeantRole(found) != "" {
		defer func() {
			if !set.hasRole() {
				// The role was refused: the markers that go with it are
				// not judged without it, so one mistake gives one error.
				delete(set, Key)
				delete(set, Name)
				delete(set, Sequential)
			}
		}()
	}
	for _, f := range found {
		def, ok := Lookup(f.Name)
		if !ok {
			if s := Suggest(f.Name); s != "" {
				bad(f, "unknown marker %s%s; did you mean %s%s?", Prefix, f.Name, Prefix, s)
			} else {
				bad(f, "unknown marker %s%s; known markers: %s", Prefix, f.Name, knownNames())
			}
			continue
		}
		if first, dup := set[f.Name]; dup {
			probs = append(probs, Problem{Pos: f.Pos, Msg: fmt.Sprintf("duplicate marker %s%s on one declaration; keep one", Prefix, f.Name),
				Related: []Related{{Pos: first.Pos, Msg: "first " + Prefix + f.Name + " here"}}})
			continue
		}
		if def.Targets&target == 0 {
			bad(f, "marker %s%s is not allowed on a %s; %s", Prefix, f.Name, target, placement(def))
			continue
		}
		switch {
		case def.Value == NeedsValue && (!f.HasValue || f.Value == ""):
			bad(f, "marker %s%s needs a value: write %s%s=%s", Prefix, f.Name, Prefix, f.Name, def.Arg)
			continue
		case def.Value == NoValue && f.HasValue:
			bad(f, "marker %s%s takes no value: write %s%s", Prefix, f.Name, Prefix, f.Name)
			continue
		}
		if def.Arg == "CATEGORY" {
			if err := CheckCategory(f.Value); err != nil {
				bad(f, "%s%s: %v", Prefix, f.Name, err)
				continue
			}
		}
		if def.Arg == "NAME" {
			if err := CheckHandlerName(f.Value); err != nil {
				bad(f, "%s%s: %v", Prefix, f.Name, err)
				continue
			}
		}
		if def.Arg == "FIELD" && strings.IndexFunc(f.Value, unicode.IsSpace) >= 0 {
			bad(f, "%s%s: field name %q contains white space; name one field", Prefix, f.Name, f.Value)
			continue
		}
		set[f.Name] = f
	}
	return set, append(probs, checkCombination(set, MeantRole(found))...)
}

func (s Set) hasRole() bool {
	return s.Has(Event) || s.Has(Command) || s.Has(Handler) || s.Has(CommandHandler) || s.Has(PM)
}

// MeantRole is the role (event, command, handler, commandhandler or pm)
// the first of found names, or nearly names, in a marker that may itself
// be refused (a bad category, a value where none goes, a misspelling):
// what the declaration was meant to be. "" when no marker names one.
func MeantRole(found []Found) string {
	for _, f := range found {
		name := f.Name
		if _, ok := Lookup(name); !ok {
			name = Suggest(name)
		}
		switch name {
		case Event, Command, Handler, CommandHandler, PM:
			return name
		}
	}
	return ""
}

// checkCombination reports markers that do not go together on one type.
// meant is MeantRole's: when no role survived but one was meant, what
// depends on it is not judged (Check drops it).
func checkCombination(set Set, meant string) []Problem {
	if meant != "" && !set.hasRole() {
		return nil
	}
	var probs []Problem
	var roles []Found
	for _, name := range []string{Event, Command, Handler, CommandHandler, PM} {
		if f, ok := set[name]; ok {
			roles = append(roles, f)
		}
	}
	if len(roles) > 1 {
		first := roles[0]
		for _, f := range roles[1:] {
			probs = append(probs, Problem{Pos: f.Pos,
				Msg:     fmt.Sprintf("%s%s and %s%s on one type; a type is one of event, command, handler, commandhandler or pm", Prefix, first.Name, Prefix, f.Name),
				Related: []Related{{Pos: first.Pos, Msg: Prefix + first.Name + " here"}}})
			delete(set, f.Name)
		}
	}
	if f, ok := set[Key]; ok {
		switch {
		case set.Has(PM):
			probs = append(probs, Problem{Pos: f.Pos, Msg: fmt.Sprintf("%skey is not allowed on a pm: a pm is partitioned by its %scorrelate fields; mark it %ssequential instead", Prefix, Prefix, Prefix)})
			delete(set, Key)
		case len(roles) == 0:
			probs = append(probs, Problem{Pos: f.Pos, Msg: fmt.Sprintf("%skey needs %sevent, %scommand, %shandler or %scommandhandler on the same type", Prefix, Prefix, Prefix, Prefix, Prefix)})
			delete(set, Key)
		}
	}
	if f, ok := set[Name]; ok && !set.Has(Handler) && !set.Has(CommandHandler) && !set.Has(PM) {
		probs = append(probs, Problem{Pos: f.Pos, Msg: fmt.Sprintf("%sname goes on a %shandler, %scommandhandler or %spm: it names the consumer group; a message is identified by its category and type name", Prefix, Prefix, Prefix, Prefix)})
		delete(set, Name)
	}
	if f, ok := set[Sequential]; ok && !set.Has(PM) {
		probs = append(probs, Problem{Pos: f.Pos, Msg: fmt.Sprintf("%ssequential goes on a %spm; for a handler use %skey=FIELD", Prefix, Prefix, Prefix)})
		delete(set, Sequential)
	}
	return probs
}

// CheckCategory applies the category name rules: non-empty, no ':', '{',
// '}' or white space, not of the reserved __name__ form.
func CheckCategory(c string) error {
	switch {
	case c == "":
		return fmt.Errorf("category is empty")
	case strings.Contains(c, ":"):
		return fmt.Errorf("category %q contains ':'; ':' separates a category from its partition key", c)
	case strings.ContainsAny(c, "{}"):
		return fmt.Errorf("category %q contains '{' or '}'; the category is the Redis Cluster hash tag of its index and signals", c)
	case strings.IndexFunc(c, unicode.IsSpace) >= 0:
		return fmt.Errorf("category %q contains white space", c)
	case isReserved(c):
		return fmt.Errorf("category %q has the reserved __name__ form", c)
	}
	return nil
}

// CheckHandlerName applies the rules for a //seqby:name value, the name of
// a handler's consumer group: letters, digits and '.', '_', '-', '/',
// starting with a letter or digit, not of the reserved __name__ form. The
// name becomes part of Redis key names (seqby:__members__:NAME, where ':'
// separates fields and '{' '}' would make a Redis Cluster hash tag) and an
// argument of seqbyctl (where white space splits and a leading '-' reads
// as a flag); the default name, an import path and type name, fits the same
// alphabet.
func CheckHandlerName(n string) error {
	switch {
	case n == "":
		return fmt.Errorf("name is empty")
	case isReserved(n):
		return fmt.Errorf("name %q has the reserved __name__ form", n)
	}
	for _, r := range n {
		if !isAlnum(r) && !strings.ContainsRune("._-/", r) {
			return fmt.Errorf("name %q contains %q; a handler name uses letters, digits and '.', '_', '-', '/' only (it is part of Redis key names, where ':' separates fields and '{' '}' make a hash tag)", n, r)
		}
	}
	if !isAlnum(rune(n[0])) {
		return fmt.Errorf("name %q does not start with a letter or digit", n)
	}
	return nil
}

func isAlnum(r rune) bool {
	return r < 0x80 && (unicode.IsLetter(r) || unicode.IsDigit(r))
}

// isReserved matches ^__.+__$ (kept here so annotations stays free of the
// runtime's dependencies; the runtime's key rules apply the same one).
func isReserved(s string) bool {
	return len(s) > 4 && strings.HasPrefix(s, "__") && strings.HasSuffix(s, "__")
}

func placement(d Def) string {
	return Prefix + d.Name + " goes " + strings.SplitN(d.Help, ":", 2)[0]
}

func knownNames() string {
	names := make([]string, len(Defs))
	for i, d := range Defs {
		names[i] = d.Name
	}
	return strings.Join(names, ", ")
}
