package runtime

import (
	"context"
	"time"

	"github.com/seqby/seqby/runtime/internal/executor"
	"github.com/seqby/seqby/runtime/internal/rdb"
)

// Retention: a stream keeps only what some consumer group of its category
// has not acked (package maintenance's Trim), so an idle, fully handled
// partition ends empty. Every worker that acks trims its own lanes,
// batched: after trimEvery acks, and when it finds its lanes drained.
// Dead-letter streams are never trimmed.

// trimEvery is how many acks a worker makes before it trims while busy.
const trimEvery = 100

// trimQuiet spaces the trims of a worker that keeps finding its lanes
// drained: a trim costs a round trip per lane, and a partition that gets
// an event now and then drains after each one.
const trimQuiet = time.Second

// trimmer counts a worker's acks since its last trim.
type trimmer struct {
	acks int
	last time.Time // the last trim tried
}

// acked counts one ack.
func (t *trimmer) acked() { t.acks++ }

// inherit makes a trim due once the lanes are drained, though this
// worker acked nothing yet: what its predecessors acked may be there.
func (t *trimmer) inherit() { t.acks = max(t.acks, 1) }

// due reports whether the worker should trim now: it acked every
// entries (trimEvery, or more for a batched partition: see
// partition.trimIf), or it found its lanes drained after acking any and
// its last trim is trimQuiet old.
func (t *trimmer) due(drained bool, every int) bool {
	return t.acks >= every || drained && t.acks > 0 && time.Since(t.last) >= trimQuiet
}

// wait is how long a drained worker may wait before its trim is due (0:
// none is pending): its idle wait ends by then, so what it acked is
// trimmed (and the partition can turn cold) without waiting for more work.
func (t *trimmer) wait() time.Duration {
	if t.acks == 0 {
		return 0
	}
	return max(trimQuiet-time.Since(t.last), time.Millisecond)
}

// trim runs retention on lanes (the category of each in cats) and resets
// t when it succeeded (package maintenance makes the calls). A failed trim
// stays due, retried trimQuiet later (not at once: a drained partition
// would spin on it), so an idle partition does not keep its acked entries
// (and never turn cold) until it acks again. handler names the worker
// that trims, for its log line.
func (e *Engine) trim(ctx context.Context, handler string, t *trimmer, cats, lanes []string) {
	ok := e.maint.Trim(ctx, handler, cats, lanes)
	t.last = time.Now()
	if ok {
		t.acks = 0
	}
}

// GroupStart says where a handler that has never run starts reading its
// categories.
type GroupStart int

const (
	// StartFromRetained reads from the first entry retention kept: what
	// some other handler of the category has not acked yet (everything,
	// on a category no handler read before).
	StartFromRetained GroupStart = iota
	// StartFromNew reads only entries published after the handler first
	// started (its first registration in Redis).
	StartFromNew
)

// registerGroups records every registration's group with each category it
// reads, so retention keeps what a group has not read even on streams
// where it does not exist yet, and returns each group's start id (for
// the executor). A group registered before keeps its start. First it
// records each handler's kind and build for rolling deploys (package membership),
// refusing a handler whose kind changed while the other kind runs.
func (e *Engine) registerGroups(ctx context.Context, cs []consumer) (map[executor.Group]string, error) {
	if err := e.members.RegisterDeploy(ctx, deployBuilds(cs)); err != nil {
		return nil, err
	}
	starts := map[executor.Group]string{}
	for _, c := range cs {
		start, err := rdb.RegisterGroup(ctx, e.c, c.category, c.reg.Name, e.o.NewHandlerStart == StartFromNew)
		if err != nil {
			return nil, err
		}
		starts[executor.Group{Category: c.category, Handler: c.reg.Name}] = start
	}
	return starts, nil
}
