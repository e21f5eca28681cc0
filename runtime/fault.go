package runtime

import (
	"errors"
	"strings"
	"time"

	"github.com/seqby/seqby/runtime/internal/membership"
	"github.com/seqby/seqby/runtime/internal/rdb"
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

// releaseGrace bounds how long a worker asked to hand over (or to stop
// with Run) keeps retrying a failing Redis call before it gives up and
// leaves the entry to the next owner: Run returns within a bounded time
// whatever Redis does.
func (e *Engine) releaseGrace() time.Duration { return e.o.LeaseTTL }

// retryable handles a Redis error of a partition worker. Fenced (or a
// lost lease) ends the partition. A permanent error counts toward
// PermanentRedisErrors, after which the partition is released (Fault).
// Otherwise it waits a backoff that doubles from RetryBackoff to MaxBackoff
// and returns true to retry, while the lease lasts and, once a handover or
// shutdown was asked for, for at most releaseGrace.
func (p *partition) retryable(err error) bool {
	e := p.e
	if errors.Is(err, ErrFenced) {
		p.held.Lost(err)
		return false
	}
	if p.held.Context().Err() != nil {
		return false
	}
	permanent := rdb.Permanent(err)
	if permanent {
		p.redisErrs.permanent++
		if p.redisErrs.permanent >= PermanentRedisErrors {
			e.releaseFaulted(p, err)
			return false
		}
	}
	p.redisErrs.backoff = min(max(2*p.redisErrs.backoff, e.o.RetryBackoff), e.o.MaxBackoff)
	e.log.Warn("seqby: redis error; retrying", "handler", p.reg.Name, "stream", p.lanes[0], "permanent", permanent,
		"retry_in", p.redisErrs.backoff, "err", err)
	return p.backoff(p.redisErrs.backoff)
}

// backoff waits d; false when the partition must end meanwhile: its lease
// ended, or it was asked to hand over longer than releaseGrace ago.
func (p *partition) backoff(d time.Duration) bool {
	for {
		release := p.release
		if p.releasing() {
			release = nil
			left := time.Until(p.releasedAt().Add(p.e.releaseGrace()))
			if left <= 0 {
				p.e.log.Warn("seqby: giving up on redis while handing over; the entry in hand, if any, is processed again by the next owner",
					"handler", p.reg.Name, "stream", p.lanes[0])
				return false
			}
			d = min(d, left)
		}
		t := time.NewTimer(d)
		select {
		case <-t.C:
			return true
		case <-p.held.Context().Done():
			t.Stop()
			return false
		case <-release:
			t.Stop()
		}
	}
}

// redisOK resets the Redis error counts after a call succeeded.
func (p *partition) redisOK() { p.redisErrs = redisErrs{} }

// redisErrs counts a worker's Redis errors since its last success. Only
// the partition's own goroutine touches it.
type redisErrs struct {
	permanent int
	backoff   time.Duration
}

// releaseFaulted reports that p gives up for permanent Redis errors: the
// instance record benches it for FaultBench (claimable refuses it) and
// counts it toward this instance's stall, so others take it.
func (e *Engine) releaseFaulted(p *partition, err error) {
	now := time.Now()
	category := p.category
	if p.cats != nil {
		category = strings.Join(p.cats, ",")
	}
	e.members.Release(p.id, membership.Fault{Kind: membership.FaultReleased, Handler: p.reg.Name, Category: category, Key: p.key,
		Stream: p.lanes[0], Err: err, Since: now, Until: now.Add(FaultBench)})
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
