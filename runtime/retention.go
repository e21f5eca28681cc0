package runtime

import (
	"context"

	"github.com/seqby/seqby/runtime/internal/executor"
	"github.com/seqby/seqby/runtime/internal/rdb"
	"github.com/seqby/seqby/runtime/internal/worker"
)

// Retention: a stream keeps only what some consumer group of its category
// has not acked (package maintenance's Trim), so an idle, fully handled
// partition ends empty. Every worker that acks trims its own lanes,
// batched: after worker.TrimEvery acks, and when it finds its lanes
// drained (worker.Trims counts). Dead-letter streams are never trimmed.

// trim runs retention on lanes (the category of each in cats) and resets
// t when it succeeded. A failure is logged and tried again at the next
// due trim: retention lagging behind loses nothing. handler names the
// worker that trims, for its log line.
func (e *Engine) trim(ctx context.Context, handler string, t *worker.Trims, cats, lanes []string) {
	// A failed trim stays due, retried a while later (Trims.Tried).
	t.Tried(e.maint.Trim(ctx, handler, cats, lanes))
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
// refusing a handler whose kind changed while the other kind runs, or one
// an engine of the earlier key layout runs (ErrUpgrade), then moves the
// earlier layout's state of the handlers into this one's (rdb.MigrateLayout).
func (e *Engine) registerGroups(ctx context.Context, cs []consumer) (map[executor.Group]string, error) {
	builds := deployBuilds(cs)
	if err := e.members.RegisterDeploy(ctx, builds); err != nil {
		return nil, err
	}
	// No engine of the earlier key layout runs these handlers (RegisterDeploy
	// refused otherwise): move what it left into this layout's keys.
	names := make([]string, len(builds))
	for i, b := range builds {
		names[i] = b.Name
	}
	left, err := rdb.MigrateLayout(ctx, e.c, names)
	if err != nil {
		return nil, err
	}
	for _, key := range left {
		e.o.Logger.Warn("seqby: a key of the earlier key layout was not migrated: no engine reads it; look at it, then delete it and its member in seqby:__halted__:<handler> or seqby:__paused__:<handler> (docs/upgrading.md)", "key", key)
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
