package lease

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seqby/seqby/runtime/internal/rdb"
)

// An operator pauses one key of a handler (inspect.Inspector.Pause, seqbyctl
// pause) or the whole handler (PauseHandler, seqbyctl pause -all).
//
// A key's pause is a mark in the partition's slot (rdb.PauseKey). Every
// call an attempt can start under (the fenced read that returns the
// entry, the ack that confirms the lease for the next entry read ahead, a
// verification, a halted head's begin_attempt) checks it after its acks
// and refuses (rdb.ErrPaused): the event in flight finishes and is acked,
// and no later one starts. The owner keeps its lease (renewals go on) and
// the entries it read ahead, and sleeps, as an idle partition does, until a wake-up
// signal for the key, which Resume sends after deleting the mark, so a
// paused partition costs what an idle one does and resumes within one wake-up. The
// mark outlives owners: a new owner's first read finds it.
//
// A handler's pause is a key read by each discovery cycle: from the next
// cycle on no attempt of the handler starts (its partitions sleep until
// a later cycle finds the pause gone). The handler's pause is not in the
// scripts, so an engine that cannot read it would not learn of one: it
// fails closed. Once a read has failed and the last one that succeeded
// was sent more than two discovery intervals ago (pauseReadLimit), the
// handler counts as paused here (an unread pause) until a read succeeds.
// Two intervals, not one: a cycle runs late now and then (the cycles of
// every handler run one after the other), and a read that failed once
// must not stop a handler that the next cycle reads fine.

// HandlerPause is a whole handler's pause as this engine last read it.
type HandlerPause struct {
	ctx    context.Context // ends when a discovery cycle finds the pause gone
	cancel context.CancelFunc
	// unread: not an operator's pause (as far as this engine knows): its
	// reads of the pause failed for longer than pauseReadLimit, so no
	// attempt starts until one succeeds. Guarded by Pauses.mu.
	unread bool
}

// Context ends when the pause does: a discovery cycle found it gone, or
// Run returned (End).
func (hp *HandlerPause) Context() context.Context { return hp.ctx }

// PausesConfig is what Pauses need from the engine; NewPauses takes it.
type PausesConfig struct {
	// Client is the engine's Redis client.
	Client redis.UniversalClient
	// Log gets the pauses' notes and warnings.
	Log *slog.Logger
	// DiscoveryInterval is Options.DiscoveryInterval: each cycle reads
	// the pauses, and an unread pause starts after two of them.
	DiscoveryInterval time.Duration
}

// Pauses are the handlers found paused by the last discovery cycles.
// Its zero value is not usable; NewPauses builds one.
type Pauses struct {
	cfg PausesConfig
	mu  sync.Mutex
	m   map[string]*HandlerPause
	// reads are each handler's reads of its pause.
	reads map[string]*pauseRead
}

// NewPauses returns Pauses with no handler paused.
func NewPauses(cfg PausesConfig) *Pauses {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Pauses{cfg: cfg}
}

// pauseRead is how a handler's reads of its pause went.
type pauseRead struct {
	ok     time.Time // when the last read that succeeded was sent (zero: none yet)
	failed bool      // a read failed since then
}

// pauseReadLimit is how old the last successful read of a handler's pause
// may be, once a read has failed, before the handler counts as paused.
func (ps *Pauses) pauseReadLimit() time.Duration { return 2 * ps.cfg.DiscoveryInterval }

// Read reads whether handler is paused and starts or ends its pause
// here; a failed read counts toward the unread pause.
func (ps *Pauses) Read(ctx context.Context, handler string) {
	sent := time.Now()
	// HMGET rather than HEXISTS: the documented engine ACL line grants it.
	v, err := ps.cfg.Client.HMGet(ctx, rdb.ControlKey(handler), rdb.MetaPaused).Result()
	if err != nil {
		ps.cfg.Log.Debug("seqby: reading the handler's pause failed", "handler", handler, "err", err)
		ps.mu.Lock()
		r := ps.read(handler)
		r.failed = true
		ps.mu.Unlock()
		// Fail closed now if the last success is that old already.
		ps.Paused(handler)
		return
	}
	ps.set(handler, len(v) == 1 && v[0] != nil, sent)
}

// read is handler's pauseRead, made on first use; mu held.
func (ps *Pauses) read(handler string) *pauseRead {
	r := ps.reads[handler]
	if r == nil {
		if ps.reads == nil {
			ps.reads = map[string]*pauseRead{}
		}
		r = &pauseRead{}
		ps.reads[handler] = r
	}
	return r
}

// set starts or ends handler's pause here, as a read sent at sent found
// it; an unread pause ends (or becomes the operator's).
func (ps *Pauses) set(handler string, paused bool, sent time.Time) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	r := ps.read(handler)
	r.ok, r.failed = later(r.ok, sent), false
	hp := ps.m[handler]
	if hp != nil && hp.unread {
		if paused {
			hp.unread = false // the same sleepers go on sleeping, for the operator now
			ps.cfg.Log.Info("seqby: read the handler's pause again; it is paused by an operator, no attempt starts until it is resumed (seqbyctl resume -all)", "handler", handler)
			return
		}
		hp.cancel()
		delete(ps.m, handler)
		ps.cfg.Log.Info("seqby: read the handler's pause again; it is not paused, attempts start again", "handler", handler)
		return
	}
	switch {
	case paused && hp == nil:
		ps.start(handler, false)
		ps.cfg.Log.Info("seqby: handler paused by an operator; no attempt starts until it is resumed (seqbyctl resume -all)", "handler", handler)
	case !paused && hp != nil:
		hp.cancel()
		delete(ps.m, handler)
		ps.cfg.Log.Info("seqby: handler resumed", "handler", handler)
	}
}

// start makes handler's pause here; mu held.
func (ps *Pauses) start(handler string, unread bool) *HandlerPause {
	if ps.m == nil {
		ps.m = map[string]*HandlerPause{}
	}
	ctx, cancel := context.WithCancel(context.Background())
	hp := &HandlerPause{ctx: ctx, cancel: cancel, unread: unread}
	ps.m[handler] = hp
	return hp
}

// End ends every handler pause as Run returns, so nothing waits on one.
func (ps *Pauses) End() {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	for h, hp := range ps.m {
		hp.cancel()
		delete(ps.m, h)
	}
}

// Reasons are Health's lines for the handlers paused here, sorted.
func (ps *Pauses) Reasons() []string {
	var out []string
	ps.mu.Lock()
	for h, hp := range ps.m {
		if hp.unread {
			out = append(out, "paused: handler "+h+" (every key): this instance cannot read its pause from Redis; no attempt starts until a read succeeds")
			continue
		}
		out = append(out, "paused: handler "+h+" (every key) by an operator; seqbyctl resume -handler "+h+" -all")
	}
	ps.mu.Unlock()
	slices.Sort(out)
	return out
}

// Handlers are the handlers paused here, unsorted (Status sorts them).
func (ps *Pauses) Handlers() []string {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	var out []string
	for h := range ps.m {
		out = append(out, h)
	}
	return out
}

// later is the later of a and b.
func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
