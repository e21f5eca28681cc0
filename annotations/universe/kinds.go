package universe

// The other predeclared types of basic kinds a key field can have, for the
// compile-time checks of key fields seqby_gen.go writes ((*Int32)(&m.Seq)
// compiles only while Seq's underlying type is int32). String, Int64,
// Uint64 and Byte (uint8) are declared in universe.go.
type (
	Int     = int
	Int8    = int8
	Int16   = int16
	Int32   = int32
	Uint    = uint
	Uint8   = uint8
	Uint16  = uint16
	Uint32  = uint32
	Uintptr = uintptr
	Float32 = float32
	Float64 = float64
	Bool    = bool
)
