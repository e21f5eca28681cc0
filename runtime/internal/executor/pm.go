package executor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/seqby/seqby/runtime/internal/contract"
	"github.com/seqby/seqby/runtime/internal/rdb"
)

// maxStateConflicts bounds the immediate reload-and-retry of a pm that is
// not sequential when its save meets a concurrent save of the same
// instance; past it the conflict counts as a failed attempt.
const maxStateConflicts = 20

// applyPMOptimistic applies m to a pm that is not sequential: events of
// one instance may be handled at once by several instances, so a save can
// meet a concurrent one (ErrStateConflict); it then reloads and re-runs the
// handle method on the fresh state (optimistic concurrency).
func (x *Executor) applyPMOptimistic(ctx context.Context, h *handler, rt Route, corr string, m any) error {
	for conflicts := 0; ; conflicts++ {
		_, err := x.applyPM(ctx, h, rt, corr, m, nil)
		if !errors.Is(err, contract.ErrStateConflict) || conflicts >= maxStateConflicts || ctx.Err() != nil {
			return err
		}
	}
}

// ApplyPM is one attempt of the pm added as name on m, of correlation
// value corr: load its state, call it, save the state; the caller holds
// a slot. en, when set, is the entry applied (a sequential pm's): a state
// that already includes it (Config.LoadApplied) is not applied again, and
// the save records it. infra reports a store failure that is not the
// message's fault.
func (x *Executor) ApplyPM(ctx context.Context, name string, rt Route, corr string, m any, en *rdb.Entry) (infra bool, err error) {
	return x.applyPM(ctx, x.mustHandler(name), rt, corr, m, en)
}

// applyPM is ApplyPM for h.
func (x *Executor) applyPM(ctx context.Context, h *handler, rt Route, corr string, m any, en *rdb.Entry) (infra bool, err error) {
	var data []byte
	var version int64
	last := ""
	if x.cfg.LoadApplied != nil && en != nil {
		data, version, last, err = x.cfg.LoadApplied(ctx, h.Name, corr, en.Stream)
	} else {
		data, version, err = x.cfg.States.Load(ctx, h.Name, corr)
	}
	if err != nil {
		return true, fmt.Errorf("load state of pm %s for %q: %w", h.Name, corr, err)
	}
	if last != "" && !EntryAfter(en.ID, last) {
		// Saved with the state by a previous owner that died before its
		// ack: applying it again would count it twice.
		x.log.Info("seqby: pm entry already in the saved state; acking it without applying it again",
			"handler", h.Name, "correlation", corr, "stream", en.Stream, "entry", en.ID)
		return false, nil
	}
	saveCtx := ctx
	if en != nil {
		saveCtx = WithApplied(ctx, en.Stream, en.ID)
	}
	state := h.NewState()
	if data != nil {
		if err := json.Unmarshal(data, state); err != nil {
			return false, fmt.Errorf("decode state of pm %s for %q (version %d): %w", h.Name, corr, version, err)
		}
	}
	if err := Invoke(ctx, rt, state, m); err != nil {
		return false, err
	}
	if data, err = json.Marshal(state); err != nil {
		return false, fmt.Errorf("encode state of pm %s for %q: %w", h.Name, corr, err)
	}
	if err := x.cfg.States.Save(saveCtx, h.Name, corr, data, version); err != nil {
		return !errors.Is(err, contract.ErrStateConflict), fmt.Errorf("save state of pm %s for %q: %w", h.Name, corr, err)
	}
	return false, nil
}
