package annotations

// Target is the kind of declaration a marker stands on.
type Target uint8

// The declarations markers can be found on.
const (
	StructType Target = 1 << iota // a type whose underlying type is a struct
	OtherType                     // any other named type
	Method                        // a method declaration
	Func                          // a function that is not a method
	Elsewhere                     // a field, variable, constant, import or a floating comment
)

// AnyType is a type declaration of any kind.
const AnyType = StructType | OtherType

func (t Target) String() string {
	switch t {
	case StructType:
		return "struct type"
	case OtherType:
		return "non-struct type"
	case Method:
		return "method"
	case Func:
		return "function"
	}
	return "declaration other than a type or method"
}

// ValueRule says whether a marker takes a value.
type ValueRule uint8

// Value rules.
const (
	NoValue ValueRule = iota
	NeedsValue
)

// Def describes one marker.
type Def struct {
	Name    string
	Targets Target
	Value   ValueRule
	Arg     string // what the value is, for messages ("CATEGORY", "FIELD")
	Help    string // one line, for seqgen -h (docs/markers.md says it at length)
}

// The markers, in the order they are documented.
const (
	Event          = "event"
	Command        = "command"
	Key            = "key"
	Handler        = "handler"
	CommandHandler = "commandhandler"
	PM             = "pm"
	Sequential     = "sequential"
	Correlate      = "correlate"
	Name           = "name"
)

// Defs is the marker registry.
var Defs = []Def{
	{Event, StructType, NeedsValue, "CATEGORY", "on a struct: an event published to stream category CATEGORY"},
	{Command, StructType, NeedsValue, "CATEGORY", "on a struct: a command on category CATEGORY"},
	{Key, AnyType, NeedsValue, "FIELD", "on an event or command: its category is partitioned by FIELD; on a handler or command handler: sequential by FIELD"},
	{Handler, AnyType, NoValue, "", "on a type: an event handler"},
	{CommandHandler, AnyType, NoValue, "", "on a type: a command handler"},
	{PM, AnyType, NoValue, "", "on a type: a process manager"},
	{Sequential, AnyType, NoValue, "", "on a pm: one event at a time per correlation value"},
	{Correlate, Method, NeedsValue, "FIELD", "on a pm's handle method: the event field carrying the correlation value"},
	{Name, AnyType, NeedsValue, "NAME", "on a handler, command handler or pm: its stable name, the consumer group (default import/path.Type)"},
}

// Lookup finds a marker definition by name.
func Lookup(name string) (Def, bool) {
	for _, d := range Defs {
		if d.Name == name {
			return d, true
		}
	}
	return Def{}, false
}

// Suggest returns the known marker name closest to name, or "" when none is
// close enough (two edits at most, and fewer than name has letters) to be a
// likely typo.
func Suggest(name string) string {
	best, bestDist := "", 3
	for _, d := range Defs {
		if dist := editDistance(name, d.Name); dist < bestDist && dist < len(name) {
			best, bestDist = d.Name, dist
		}
	}
	return best
}

// editDistance is the optimal string alignment distance: insertions,
// deletions, substitutions and transpositions of neighbours ("kye"→"key" is 1).
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	d := make([][]int, len(ra)+1)
	for i := range d {
		d[i] = make([]int, len(rb)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(ra); i++ {
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(ra)][len(rb)]
}
