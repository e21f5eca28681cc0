package runtime

import (
	"time"

	"github.com/seqby/seqby/runtime/internal/membership"
)

// FaultKind says what an engine Fault is.
type FaultKind string

const (
	// FaultReleased: a partition's worker met PermanentRedisErrors
	// permanent Redis errors since its last successful Redis call
	// (NOPERM, CROSSSLOT, WRONGTYPE, a script error), or the heartbeat as
	// many renewing its lease, and the partition was released instead of
	// held. This instance does not claim it again for FaultBench, so the
	// other instances take it over; two such partitions of a handler take
	// the instance out of the handler's member set for a while. An entry
	// processed but not acked is processed again by the next owner.
	FaultReleased FaultKind = "released"
	// FaultUnowned: a partition with work for the handler (entries
	// pending or not yet read) has had no owner for longer than
	// Engine.UnownedAfter: every instance running the handler is failing to
	// claim it, or none runs.
	FaultUnowned FaultKind = "unowned"
)

// PermanentRedisErrors is how many permanent Redis errors (the server
// refuses the command itself) a partition worker takes since its last
// successful Redis call, or the heartbeat renewing its lease, before the
// partition is released (FaultReleased). Transient
// errors (the network, LOADING, TRYAGAIN, a failover) are retried with
// exponential backoff from RetryBackoff to MaxBackoff while the lease
// lasts.
const PermanentRedisErrors = 5

// FaultBench is how long an instance leaves a partition alone after it
// released it for permanent Redis errors (FaultReleased).
const FaultBench = time.Minute

// Fault is a partition the engine cannot serve: reported through the log,
// Options.OnFault (called on its own goroutine) and Status.Faults while it
// lasts.
type Fault struct {
	Kind     FaultKind // FaultReleased or FaultUnowned: which fields below are set
	Handler  string    // Registration.Name
	Category string    // for a pm, its categories joined by ","
	Key      string    // partition key, or a pm's correlation value
	Stream   string    // the partition stream (for a pm, its first stream)
	// Err is the last Redis error (FaultReleased).
	Err error
	// Since is when the partition was released (FaultReleased) or first
	// seen without an owner (FaultUnowned).
	Since time.Time
	// Until is when this instance may claim the partition again
	// (FaultReleased; zero for FaultUnowned).
	Until time.Time
}

// faultOf converts the instance record's fault.
func faultOf(f membership.Fault) Fault {
	return Fault{Kind: FaultKind(f.Kind), Handler: f.Handler, Category: f.Category, Key: f.Key, Stream: f.Stream,
		Err: f.Err, Since: f.Since, Until: f.Until}
}

// memberFault converts a fault for the instance record.
func memberFault(f Fault) membership.Fault {
	return membership.Fault{Kind: string(f.Kind), Handler: f.Handler, Category: f.Category, Key: f.Key, Stream: f.Stream,
		Err: f.Err, Since: f.Since, Until: f.Until}
}

// faultList returns the current faults, sorted, for Status.
func (e *Engine) faultList() []Fault {
	var out []Fault
	for _, f := range e.members.Faults() {
		out = append(out, faultOf(f))
	}
	return out
}

// alertFault calls OnFault.
func (e *Engine) alertFault(f Fault) {
	if e.o.OnFault != nil {
		e.callback("OnFault", func() { e.o.OnFault(f) })
	}
}
