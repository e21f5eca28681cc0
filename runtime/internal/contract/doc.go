// Package contract holds what the engine's packages and package runtime
// must agree on without importing one another: the sentinel errors a
// caller tests with errors.Is, the context keys a handler's context
// carries, and plain copies of the runtime's documented structs that
// travel through them (LeaseInfo, MessageInfo, Halt).
//
// Package runtime re-exports the errors (var ErrX = contract.ErrX, so
// errors.Is holds across both names) and keeps its documented structs;
// a copy here has the same fields in the same order, so runtime converts
// one into the other (LeaseInfo(li), (*Halt)(h)) without copying field by
// field. It imports nothing of the engine: every package may import it.
package contract
