// Package contract holds what the engine's packages and package runtime
// must agree on without importing one another: the sentinel errors a
// caller tests with errors.Is and the Halt a handler's failure becomes,
// a plain copy of runtime.Halt. (The context keys of a handler's context
// and the LeaseInfo and MessageInfo they carry are package executor's:
// it builds that context.)
//
// Package runtime re-exports the errors (var ErrX = contract.ErrX, so
// errors.Is holds across both names) and keeps its documented structs;
// a copy here has the same fields in the same order, so runtime converts
// one into the other ((*Halt)(h)) without copying field by
// field. It imports nothing of the engine: every package may import it.
package contract
