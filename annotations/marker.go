package annotations

import (
	"fmt"
	"strings"
	"unicode"
)

// Prefix starts every marker line.
const Prefix = "//seqby:"

// Marker is one parsed marker line.
type Marker struct {
	Name     string // e.g. "key"
	Value    string // the text after '=', "" when there is none
	HasValue bool   // whether '=' was present
	Offset   int    // byte offset of the line's "//" within the source it came from
}

func (m Marker) String() string {
	if m.HasValue {
		return Prefix + m.Name + "=" + m.Value
	}
	return Prefix + m.Name
}

// IsMarker reports whether a raw comment line is a marker line. Lines such
// as "// seqby:key" (with a space) are ordinary comments.
func IsMarker(line string) bool { return strings.HasPrefix(line, Prefix) }

// Parse parses a raw comment line (as in ast.Comment.Text, starting with
// "//"). ok is false when the line is not a marker line at all. err reports
// a malformed marker: no name, or a name that is not an identifier. Whether
// the name is known and the value fits is decided by Check.
func Parse(line string) (m Marker, ok bool, err error) {
	if !IsMarker(line) {
		return Marker{}, false, nil
	}
	body := strings.TrimRightFunc(line[len(Prefix):], unicode.IsSpace)
	name, value, hasValue := strings.Cut(body, "=")
	m = Marker{Name: name, Value: value, HasValue: hasValue}
	switch {
	case name == "":
		return m, true, fmt.Errorf("marker %q has no name; write %sNAME or %sNAME=VALUE", line, Prefix, Prefix)
	case !isIdent(name):
		return m, true, fmt.Errorf("marker %q: name %q is not a word; write %sNAME or %sNAME=VALUE with no spaces around '='", line, name, Prefix, Prefix)
	}
	return m, true, nil
}

// NearMiss reports whether a raw comment (as in ast.Comment.Text, a "//"
// line or a "/* */" block) is written almost like a marker but is not one:
// its text starts, after optional spaces, with "seqby:" in any case, and it
// is not a marker line, and "seqby:" is followed by a word and then the
// end of the line or '=' (so "// seqby: the library" is prose). want is the
// marker line it was likely meant to be and why says what differs. Prose
// that merely mentions seqby elsewhere in the comment is not a near miss.
func NearMiss(comment string) (want, why string, ok bool) {
	if IsMarker(comment) {
		return "", "", false
	}
	var body string
	block := strings.HasPrefix(comment, "/*")
	switch {
	case block:
		body = strings.TrimSuffix(comment[2:], "*/")
	case strings.HasPrefix(comment, "//"):
		body = comment[2:]
	default:
		return "", "", false
	}
	text := strings.TrimLeftFunc(body, unicode.IsSpace)
	const word = "seqby:"
	if len(text) < len(word) || !strings.EqualFold(text[:len(word)], word) {
		return "", "", false
	}
	rest, _, _ := strings.Cut(text[len(word):], "\n")
	rest = strings.TrimRightFunc(rest, unicode.IsSpace)
	name, value, hasValue := strings.Cut(rest, "=")
	// "seqby: the library ..." is prose: a near miss names a marker after
	// the colon, as a marker line would ("seqby: key=x" and "seqby:key = x"
	// are near misses with stray spaces).
	spaced := strings.ContainsFunc(rest, unicode.IsSpace)
	name = strings.TrimSpace(name)
	if !isIdent(name) {
		return "", "", false
	}
	if _, known := Lookup(strings.ToLower(name)); spaced && !known {
		return "", "", false // "seqby: bugs": prose, unless it names a marker
	}
	value = strings.TrimSpace(value)
	want = Prefix + strings.ToLower(name)
	if hasValue {
		want += "=" + value
	}
	switch {
	case block:
		why = "a marker is a // line comment, not a /* */ block"
	case len(text) != len(body):
		why = `a marker has no space after "//"`
	case spaced:
		why = `a marker has no space after "seqby:" or around "="`
	default:
		why = `a marker starts with "seqby:" in lower case`
	}
	return want, why, true
}

func isIdent(s string) bool {
	for _, r := range s {
		if !(r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r)) {
			return false
		}
	}
	return s != ""
}
