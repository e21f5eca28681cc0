// Package annotations defines the //seqby: marker grammar: it parses marker
// lines into typed markers and checks the markers of one declaration against
// each other. It knows nothing about packages or types; the generator
// resolves fields and categories.
//
// # Grammar
//
// A marker is a comment line of the form
//
//	//seqby:NAME
//	//seqby:NAME=VALUE
//
// with no space after "//", so gofmt and go doc treat it as a directive. It
// must stand in the doc comment of a type declaration (on the type spec, or
// on an ungrouped "type" declaration) or of a method declaration. NAME is one
// of the markers below; VALUE is everything after '=' up to the end of the
// line, with trailing white space dropped.
//
// On a struct type, or on an alias of a struct type (a type you do not
// own, such as a protobuf message; for another package's type the
// generator writes a function Seqby<Alias> instead of methods, for a type
// of the alias's own package the methods as usual):
//
//	//seqby:event=CATEGORY    an event published to stream category CATEGORY
//	//seqby:command=CATEGORY  a command on category CATEGORY
//	//seqby:key=FIELD         (with event or command) the category is partitioned by FIELD
//
// On a named type with methods:
//
//	//seqby:handler           an event handler
//	//seqby:commandhandler    a command handler
//	//seqby:key=FIELD         (with handler or commandhandler) sequential by FIELD
//	//seqby:pm                a process manager
//	//seqby:sequential        (with pm) one event at a time per correlation value
//	//seqby:name=NAME         (with handler, commandhandler or pm) its stable name:
//	                          the consumer group, default "import/path.Type"
//
// On a method of a process manager:
//
//	//seqby:correlate=FIELD   the field of the handled event that carries the correlation value
//
// FIELD names a direct field of the message struct: first by its JSON name,
// else by its Go name. CATEGORY is non-empty and contains no ':' and no white
// space, and is not of the reserved __name__ form. NAME uses letters, digits
// and '.', '_', '-', '/', starts with a letter or digit, and is not of the
// __name__ form (see [CheckHandlerName]).
//
// A comment that starts, after optional spaces, with "seqby:" in any case but
// is not a marker line ("// seqby:key=x", "/* seqby:key=x */", "//SEQBY:key=x")
// is a near miss ([NearMiss]): the generator refuses it rather than ignore a
// marker its author meant.
//
// # Errors
//
// Unknown names (with the closest known name suggested), a missing or
// unexpected value, a marker repeated on one declaration, a marker on the
// wrong kind of declaration and markers that do not go together (event with
// command, key on a pm, sequential without pm, key on a struct that is
// neither a message nor a handler, name on a message) are reported by [Check].
package annotations
