package runtime

import (
	"context"

	"github.com/seqby/seqby/runtime/internal/contract"
	"github.com/seqby/seqby/runtime/internal/worker"
)

// laneTrims is one unkeyed worker's retention: it trims every
// worker.TrimEvery acks, or once its lanes are drained.
type laneTrims struct {
	e           *Engine
	handler     string
	cats, lanes []string
	t           worker.Trims
}

// Acked counts one ack.
func (l *laneTrims) Acked() { l.t.Acked() }

// TrimIf trims the lanes when due.
func (l *laneTrims) TrimIf(ctx context.Context, drained bool) {
	if l.t.Due(drained, worker.TrimEvery) {
		l.e.trim(ctx, l.handler, &l.t, l.cats, l.lanes)
	}
}

// haltsOf converts the unkeyed halts for Status; none is nil, as before.
func haltsOf(hs []contract.Halt) []Halt {
	if len(hs) == 0 {
		return nil
	}
	out := make([]Halt, len(hs))
	for i, h := range hs {
		out[i] = Halt(h)
	}
	return out
}
