// Package guarantee is seqby's multi-process guarantee suite: its tests run
// two and three engine instances as separate OS processes against a private
// redis-server, kill and stall them, and check the guarantees of docs/runtime.md ("Design") from
// what the instances recorded in Redis.
//
// The non-test files hold the suite's messages and its recording handler, so
// seqgen generates their extractors and registration like any user's code.
//
// How the suite works: the test binary re-executes itself as an engine
// instance (SEQBY_GUARANTEE_CHILD=1, see the harness), one OS process
// per instance, so a test can SIGKILL, SIGSTOP, SIGCONT and SIGTERM real
// owners. Instances keep nothing the tests read in memory: the Recorder
// writes, per key, an in-progress marker, an entry/exit log in Redis time,
// an applied log committed under the lease token, and the fenced commits it
// was refused; each instance also publishes its owned lease tokens. Tests
// wait by polling those records with deadlines, never by sleeping.
//
// Run it with the runtime tests (go test -race ./runtime/...), or 20 times
// in a row with make stress.
package guarantee

// Category is the stream category of Step, partitioned by client_id.
const Category = "client"

// Step is one event of a client. Seq is its position in the client's publish
// order; SlowMS and Fail tell the Recorder how to behave on it.
//
//seqby:event=client
//seqby:key=client_id
type Step struct {
	ClientID string `json:"client_id"`
	Seq      int    `json:"seq"`
	// SlowMS keeps the handler busy for that many milliseconds, ignoring its
	// context, like a handler body that cannot be interrupted.
	SlowMS int `json:"slow_ms,omitempty"`
	// Fail makes every attempt at the event fail: a poison message.
	Fail bool `json:"fail,omitempty"`
	// BlindCommit makes the handler report success even when its fenced
	// commit was refused, like a handler whose effect lives outside Redis
	// and never learns that it was fenced: then only the engine keeps a
	// stale owner from acking and reading on.
	BlindCommit bool `json:"blind_commit,omitempty"`
	// Crash makes the process handling the event exit at once, like a
	// message that overflows the stack or gets its process OOM-killed.
	Crash bool `json:"crash,omitempty"`
	// Outage makes every attempt at the event fail while the key's outage
	// flag is set in Redis: a downstream outage, a transient failure.
	Outage bool `json:"outage,omitempty"`
}

// Tagged is an event whose key field is a pointer, so a nil key can be
// published (it must be refused).
//
//seqby:event=tagged
//seqby:key=tag_id
type Tagged struct {
	TagID *string `json:"tag_id"`
}

// Note is an event of an unpartitioned category: it has no client_id, so a
// handler keyed by client_id cannot be registered for it.
//
//seqby:event=note
type Note struct {
	Text string `json:"text"`
}
