// Package universe gives Go's predeclared identifiers exported names, for
// the code seqgen writes into a package that declares its own string,
// error, any, new, nil ... at package level: there the predeclared
// identifier cannot be written, so seqby_gen.go names it through this
// package instead. Only such packages import it; nothing else needs it.
package universe

// The predeclared types seqby_gen.go uses.
type (
	String = string
	Error  = error
	Any    = any
	Byte   = byte
	Int64  = int64
	Uint64 = uint64
)

// True is the predeclared true.
const True = true

// New is the predeclared new(T).
func New[T any]() *T { return new(T) }

// Zero returns T's zero value: nil for a pointer or interface type.
func Zero[T any]() (zero T) { return zero }

// IsNil reports whether v is its type's zero value: v == nil for a
// pointer or interface.
func IsNil[T comparable](v T) bool {
	var zero T
	return v == zero
}
