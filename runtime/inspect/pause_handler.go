package inspect

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/seqby/seqby/runtime/internal/rdb"
)

// The pause of a whole handler: one mark (rdb.ControlKey) that every
// engine reads each discovery cycle, rather than a mark per partition.

// PauseHandler pauses every partition of handler until ResumeHandler;
// events in flight finish. It returns once the pause is stored. Each
// engine reads it at the start of every discovery cycle
// (Options.DiscoveryInterval) and checks what it read before every
// attempt, so it starts no event of handler after its first read sent
// after the store; an engine whose reads of the pause fail starts none
// once its last successful read is more than two DiscoveryIntervals old,
// until a read succeeds (it fails closed). So no event starts later than
// one DiscoveryInterval and a read after PauseHandler returns on an
// engine whose cycles keep time, nor, on one whose reads of the pause
// fail, later than two DiscoveryIntervals after it or the answer of its
// first failed read, whichever comes last. A handler paused already is
// left as it is (Pause.Already).
func (i *Inspector) PauseHandler(ctx context.Context, handler, by string) (Pause, error) {
	return i.pauseHandler(ctx, handler, by, false)
}

// CheckPauseHandler is PauseHandler's dry run.
func (i *Inspector) CheckPauseHandler(ctx context.Context, handler string) (Pause, error) {
	return i.pauseHandler(ctx, handler, "", true)
}

// ResumeHandler ends the pause of a whole handler; the engines go on from
// their next discovery cycle. ErrNotPaused when it was not paused. Pauses
// of single partitions stay.
func (i *Inspector) ResumeHandler(ctx context.Context, handler string) (Pause, error) {
	return i.resumeHandler(ctx, handler, false)
}

// CheckResumeHandler is ResumeHandler's dry run.
func (i *Inspector) CheckResumeHandler(ctx context.Context, handler string) (Pause, error) {
	return i.resumeHandler(ctx, handler, true)
}

func (i *Inspector) pauseHandler(ctx context.Context, handler, by string, check bool) (Pause, error) {
	if err := i.keyedHandler(ctx, handler); err != nil {
		return Pause{}, fmt.Errorf("pause handler %s: %w", handler, err)
	}
	mark := rdb.ControlKey(handler)
	p := Pause{Handler: handler, Mark: mark}
	if check {
		n, ok, err := rdb.GetPause(ctx, i.c, mark)
		if err != nil {
			return p, fmt.Errorf("pause handler %s: %w", handler, err)
		}
		if ok {
			p.By, p.At, p.Already = n.By, n.At, true
		}
		return p, nil
	}
	n, set, err := rdb.SetPause(ctx, i.c, handler, mark, rdb.PauseNote{By: by, At: time.Now().UTC()}, false)
	if err != nil {
		return p, fmt.Errorf("pause handler %s: %w", handler, err)
	}
	p.By, p.At, p.Already = n.By, n.At, !set
	return p, nil
}

func (i *Inspector) resumeHandler(ctx context.Context, handler string, check bool) (Pause, error) {
	mark := rdb.ControlKey(handler)
	if _, err := i.Handler(ctx, handler); err != nil {
		// A handler removed while paused keeps its pause, which
		// ResumeHandler still ends (else it would come back paused).
		_, ok, gerr := rdb.GetPause(ctx, i.c, mark)
		if !errors.Is(err, ErrUnknownHandler) || gerr != nil || !ok {
			return Pause{}, fmt.Errorf("resume handler %s: %w", handler, errors.Join(err, gerr))
		}
	}
	p := Pause{Handler: handler, Mark: mark}
	var n rdb.PauseNote
	var ok bool
	var err error
	if check {
		n, ok, err = rdb.GetPause(ctx, i.c, mark)
	} else {
		n, ok, err = rdb.ClearPause(ctx, i.c, handler, mark, false)
	}
	if err != nil {
		return p, fmt.Errorf("resume handler %s: %w", handler, err)
	}
	if !ok {
		return p, fmt.Errorf("resume handler %s: %w", handler, ErrNotPaused)
	}
	p.By, p.At = n.By, n.At
	return p, nil
}
