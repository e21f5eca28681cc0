package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sync/atomic"
	"time"

	"github.com/seqby/seqby/runtime/internal/worker"
)

// Health is an engine's health at one moment (Engine.Health).
//
// Live: Run is running and its heartbeat loop, which renews the leases,
// ticked within LeaseTTL. A process that is not live should be restarted.
// Ready: live, Run finished starting, Redis answers a PING within a
// second, the last renewal of the leases succeeded within LeaseTTL, and
// every keyed handler and sequential pm has finished a discovery cycle,
// the last within max(3 × DiscoveryInterval, LeaseTTL). An instance that is live but not ready
// (Redis down, say) needs no restart: it recovers by itself, and its
// leases are taken over by others meanwhile if it stays cut off.
type Health struct {
	Ready bool `json:"ready"` // "Ready" above: live, started, Redis and the leases healthy
	Live  bool `json:"live"`  // "Live" above: Run and its lease heartbeat running
	// Reasons say what is wrong, one line each, and what an operator
	// paused (a handler, or partitions this instance owns, each a line
	// starting "paused: "), which leaves the instance ready; empty when
	// ready with nothing paused.
	Reasons []string `json:"reasons"`
	// LastRenew is when the last successful renewal of this instance's
	// leases was sent (a heartbeat with none to renew counts: the first
	// heartbeat beats as Run starts); zero, and left out of the JSON,
	// before the first.
	LastRenew time.Time `json:"last_renew,omitzero"`
	// LastDiscovery is when the last discovery cycle that read its
	// partitions ended, for the handler that did so the longest ago;
	// zero, and left out of the JSON, before every handler had one.
	LastDiscovery time.Time `json:"last_discovery,omitzero"`
	// Redis is "ok", or the error of the PING.
	Redis string `json:"redis"`
}

// healthPing bounds the PING of Health.
const healthPing = time.Second

// Health reports whether e is live and ready (see Health); it sends one
// PING to Redis and waits for it at most a second (or until ctx ends).
func (e *Engine) Health(ctx context.Context) Health { return e.report(ctx, true) }

// report is Health; without ping it leaves Redis out (liveness must not
// wait on Redis: a hung Redis is no reason to restart the process), and
// says nothing of readiness.
func (e *Engine) report(ctx context.Context, ping bool) Health {
	now := time.Now()
	e.mu.Lock()
	running, consuming, started := e.life.running, e.life.consuming, e.life.startedAt
	handlers := append([]string(nil), e.life.handlers...)
	e.mu.Unlock()
	oldest := e.disc.LastCycle(handlers)
	h := Health{Reasons: []string{}, LastRenew: e.beat.renewer.RenewedAt(), LastDiscovery: oldest, Redis: "ok"}
	beat := loadTime(&e.beat.at)
	ttl := e.o.LeaseTTL
	switch {
	case !running:
		h.Reasons = append(h.Reasons, "not running: Run has not been called or has returned")
	case now.Sub(later(beat, started)) > ttl:
		h.Reasons = append(h.Reasons, fmt.Sprintf("the heartbeat loop has not run for %v (LeaseTTL %v): the process is stuck", now.Sub(later(beat, started)).Round(time.Millisecond), ttl))
	default:
		h.Live = true
	}
	if !ping {
		return h
	}
	if err := e.ping(ctx); err != nil {
		h.Redis = err.Error()
		h.Reasons = append(h.Reasons, "redis does not answer: "+err.Error())
	}
	if running && !consuming {
		h.Reasons = append(h.Reasons, "starting: Run has not finished starting")
	}
	if running && consuming {
		if since := now.Sub(later(h.LastRenew, started)); since > ttl {
			h.Reasons = append(h.Reasons, fmt.Sprintf("no lease renewal succeeded for %v (LeaseTTL %v)", since.Round(time.Millisecond), ttl))
		}
		limit := max(3*e.o.DiscoveryInterval, ttl)
		switch {
		case len(handlers) == 0:
		case oldest.IsZero():
			h.Reasons = append(h.Reasons, "no discovery cycle has succeeded yet for every keyed handler")
		case now.Sub(oldest) > limit:
			h.Reasons = append(h.Reasons, fmt.Sprintf("no discovery cycle succeeded for %v (limit %v)", now.Sub(oldest).Round(time.Millisecond), limit))
		}
	}
	h.Ready = h.Live && len(h.Reasons) == 0
	h.Reasons = append(h.Reasons, e.pausedReasons()...)
	return h
}

// HealthHandler serves Health as JSON, for a service to mount where it
// wants (/healthz, say): status 200 when ready, 503 when not. With the
// query parameter "live" (/healthz?live) it answers liveness instead,
// without asking Redis: 200 when live, 503 when not, and a body with
// neither "ready" nor "redis" (it asked about neither): "live", the
// liveness "reasons", "last_renew" and "last_discovery".
func (e *Engine) HealthHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		live := r.URL.Query().Has("live")
		h := e.report(r.Context(), !live)
		ok, body := h.Ready, any(h)
		if live {
			ok, body = h.Live, liveness{Live: h.Live, Reasons: h.Reasons, LastRenew: h.LastRenew, LastDiscovery: h.LastDiscovery}
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		if !ok {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		_ = json.NewEncoder(w).Encode(body)
	})
}

// liveness is the body of HealthHandler's "?live" answer: Health without
// what a liveness probe does not ask (readiness and Redis), so it cannot
// read "ready": false of a live instance.
type liveness struct {
	Live          bool      `json:"live"`
	Reasons       []string  `json:"reasons"`
	LastRenew     time.Time `json:"last_renew,omitzero"`
	LastDiscovery time.Time `json:"last_discovery,omitzero"`
}

// ping sends a PING and waits for its answer at most healthPing: a client
// without ContextTimeoutEnabled would wait its own ReadTimeout (3s by
// default), longer than a probe waits.
func (e *Engine) ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, healthPing)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- e.c.Ping(ctx).Err() }() // ends with the client's own timeout at the latest
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("no answer to PING within %v", healthPing)
	}
}

// maxPausedReasons bounds the paused partitions Health lists one by one.
const maxPausedReasons = 10

// pausedReasons are Health's lines for what an operator paused here: the
// paused handlers, and the paused partitions this instance owns (the
// first maxPausedReasons, then a count).
func (e *Engine) pausedReasons() []string {
	out := e.pauses.Reasons()
	var keys []string
	e.workers.Each(func(w *worker.Worker) {
		if w.Paused() && e.pauses.Paused(w.Handler()) == nil {
			keys = append(keys, fmt.Sprintf("paused: partition %s of handler %s by an operator; seqbyctl resume -handler %s -stream '%s'", w.Key(), w.Handler(), w.Handler(), w.Stream()))
		}
	})
	slices.Sort(keys)
	if len(keys) > maxPausedReasons {
		n := len(keys) - maxPausedReasons
		keys = append(keys[:maxPausedReasons], fmt.Sprintf("paused: %d more partitions (seqbyctl paused)", n))
	}
	return append(out, keys...)
}

// storeTime and loadTime keep a time in an atomic as Unix nanoseconds
// (zero: never).
func storeTime(a *atomic.Int64, t time.Time) { a.Store(t.UnixNano()) }

func loadTime(a *atomic.Int64) time.Time {
	if n := a.Load(); n != 0 {
		return time.Unix(0, n)
	}
	return time.Time{}
}

// later is the later of a and b.
func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
