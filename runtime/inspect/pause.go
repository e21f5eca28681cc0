package inspect

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/seqby/seqby/runtime/internal/rdb"
	"github.com/seqby/seqby/runtime/internal/sleep"
)

// ErrNotPaused means Resume found nothing to resume: the partition (or
// handler) is not paused; list the pauses with seqbyctl paused.
var ErrNotPaused = errors.New("not paused (no pause mark); list the pauses with seqbyctl paused")

// ErrNotWoken is the error of a Pause or Resume that did what it was
// asked (the Pause it returns is in force, or ended) but failed to wake
// the partition's owner: after a Resume the owner goes on at its next
// read (the idle safety net, a publish to the key, or a handover); after
// a Pause its Status shows the pause from its next read. Record the
// action anyway.
var ErrNotWoken = errors.New("done, but waking the partition's owner failed")

// ErrUnsettled is the error of a Pause that stored its mark, which is in
// force (every confirmation Redis runs after it refuses), but could not
// wait out the attempts confirmed just before it: ctx ended before the
// engines' admitted confirmation age could be read, or before the wait
// did. One such attempt may still start. Record the action anyway (the
// mark stays until Resume; seqbyctl and the console do), and run the
// same Pause again to settle it: it finds the mark in force and waits
// again.
var ErrUnsettled = errors.New("paused (the mark is stored), but an attempt confirmed just before it may still start; run the same pause again, with more time, to wait it out")

// Pause is an operator's pause of one partition of a handler, or of the
// whole handler (Partition ""), as Pause, Resume and Paused report it.
type Pause struct {
	Handler string `json:"handler"`
	// Partition is the partition stream category:{key} (for a sequential
	// pm, the stream of its correlation value that was named); "" for the
	// whole handler.
	Partition string `json:"partition"`
	// Mark is the Redis key holding the pause (in its field paused): the
	// partition's control hash (category:{key}:__lease__:handler:__meta__,
	// a pm's state hash {value}:__pmstate__:pm) or the handler's
	// seqby:__control__:handler.
	Mark string    `json:"mark"`
	By   string    `json:"by"` // the operator who paused it
	At   time.Time `json:"at"` // when
	// Already: Pause found it paused already (By and At are that pause's),
	// so it changed nothing.
	Already bool `json:"already,omitempty"`
}

// defaultVerifyBound is the engines' default Options.VerifyBound.
const defaultVerifyBound = 25 * time.Millisecond

// WithVerifyBound returns a copy of i for engines whose
// Options.VerifyBound is d (default 25ms): Pause waits at least that long
// (and a margin, 1/512 of it and 1ms) after the store of a pause's mark
// was answered (or after finding one in force) before it returns, longer
// when an engine recorded a larger admitted confirmation age.
func (i *Inspector) WithVerifyBound(d time.Duration) *Inspector {
	j := *i
	j.verifyBound = d
	return &j
}

func (i *Inspector) bound() time.Duration {
	if i.verifyBound > 0 {
		return i.verifyBound
	}
	return defaultVerifyBound
}

// Pause pauses one partition of handler: once it returns no event of the
// partition's key starts until Resume, on any engine; the event in
// flight, if any, finishes. The partition stays owned (its lease renewed,
// nothing polled) and the pause outlives handovers, restarts and the
// reaper. by names the operator, kept in the pause's note (record the
// action with Audit too).
//
// partition is the partition stream category:{key} of a keyed handler, or
// of a sequential pm's correlation value (CheckPartition's names, halted
// or not), or the bare key when the handler reads one category (or is a
// sequential pm): Pause(ctx, handler, "client-1", by). The pause is a
// mark in the partition's slot that every call an attempt starts under
// checks (docs/runtime.md, "Pause"); Pause stores it, wakes the owner (so
// an idle one shows the pause at once) and then waits, from the store's
// answer, the longest an attempt may start after sending the call that
// confirmed its lease: the engines' VerifyBound (WithVerifyBound), or the
// larger admitted confirmation age an engine recorded for handler after
// a confirmation was answered later than that (a slow link; at most half
// its LeaseTTL), and a margin for the clocks' rates (1/512 of it, and
// 1ms). A partition paused already is left as it is
// (Pause.Already). ErrNotWoken: paused, but the owner was not woken.
// A failed read of the admitted age is tried again, with a backoff,
// while ctx lasts; ErrUnsettled: the pause is stored, but ctx ended
// before that read or the wait succeeded, so an attempt confirmed before
// it may still start.
func (i *Inspector) Pause(ctx context.Context, handler, partition, by string) (Pause, error) {
	return i.pause(ctx, handler, partition, by, false)
}

// CheckPause runs Pause's checks and returns the Pause it would make (or
// the one in force, Already), changing nothing: an operator's dry run.
func (i *Inspector) CheckPause(ctx context.Context, handler, partition string) (Pause, error) {
	return i.pause(ctx, handler, partition, "", true)
}

// Resume ends the pause of one partition of handler and wakes its owner,
// which goes on with the next event within one wake-up. It returns the
// pause that ended; ErrNotPaused when there was none.
func (i *Inspector) Resume(ctx context.Context, handler, partition string) (Pause, error) {
	return i.resume(ctx, handler, partition, false)
}

// CheckResume runs Resume's checks and returns the pause it would end,
// changing nothing.
func (i *Inspector) CheckResume(ctx context.Context, handler, partition string) (Pause, error) {
	return i.resume(ctx, handler, partition, true)
}

// Paused lists the pauses of handler (of every handler when handler is
// ""): its whole-handler pause first, then its paused partitions, sorted
// by partition.
func (i *Inspector) Paused(ctx context.Context, handler string) ([]Pause, error) {
	handlers := []string{handler}
	if handler == "" {
		var err error
		if handlers, err = rdb.PausedHandlers(ctx, i.c); err != nil {
			return nil, err
		}
		sort.Strings(handlers)
	}
	var out []Pause
	for _, h := range handlers {
		if n, ok, err := rdb.GetPause(ctx, i.c, rdb.ControlKey(h)); err != nil {
			return nil, err
		} else if ok {
			out = append(out, Pause{Handler: h, Mark: rdb.ControlKey(h), By: n.By, At: n.At})
		}
		marks, err := rdb.PausedMarks(ctx, i.c, h, !i.readOnly)
		if err != nil {
			return nil, err
		}
		var ps []Pause
		for m, n := range marks {
			ps = append(ps, Pause{Handler: h, Partition: n.Partition, Mark: m, By: n.By, At: n.At})
		}
		sort.Slice(ps, func(a, b int) bool { return ps[a].Partition < ps[b].Partition })
		out = append(out, ps...)
	}
	return out, nil
}

// pauseTarget is the partition a pause names.
type pauseTarget struct {
	stream string   // category:{key} as named
	key    string   // the partition key (a pm's correlation value)
	mark   string   // its pause mark
	cats   []string // the categories to wake it on
}

// target resolves partition of handler to its pause mark.
func (i *Inspector) target(ctx context.Context, handler, partition string) (pauseTarget, error) {
	if !strings.ContainsAny(partition, "{}") {
		// A bare key: the partition of the handler's one category, or a
		// sequential pm's correlation value (whose streams share its
		// lease, so any of them names it).
		h, err := i.Handler(ctx, handler)
		if err != nil {
			return pauseTarget{}, err
		}
		kinds, err := rdb.DeployKinds(ctx, i.c, handler)
		if err != nil {
			return pauseTarget{}, err
		}
		if len(h.Categories) != 1 && !slices.Contains(kinds, "sequential") {
			return pauseTarget{}, fmt.Errorf("%w %q of handler %s: it reads %d categories (%s), so a key names several partitions: name the partition stream category:{key}",
				ErrNoPartition, partition, handler, len(h.Categories), listSome(h.Categories, 10))
		}
		key := partition
		partition = rdb.PartitionStream(h.Categories[0], key)
		// A pm's value may have streams in some of its categories only:
		// the first that holds one names it.
		if len(h.Categories) > 1 {
			for _, cat := range h.Categories {
				if found, err := rdb.IsPartition(ctx, i.c, cat, key); err == nil && found {
					partition = rdb.PartitionStream(cat, key)
					break
				}
			}
		}
	}
	if err := i.CheckPartition(ctx, handler, partition); err != nil {
		return pauseTarget{}, err
	}
	cat, key, ok := rdb.ParsePartitionStream(partition)
	if !ok {
		// A halted partition named by its record (a pm's value) or its
		// head's stream: pause names partition streams only.
		return pauseTarget{}, fmt.Errorf("%w %q of handler %s: name the partition stream category:{key} (seqbyctl partitions lists them)", ErrNoPartition, partition, handler)
	}
	// The engines' deploy records say whether handler is a sequential
	// pm, whose owners check the mark of the pm's lease on the value;
	// without one (no engine ran it yet), the keys the kinds leave do.
	kinds, err := rdb.DeployKinds(ctx, i.c, handler)
	if err != nil {
		return pauseTarget{}, err
	}
	pm := slices.Contains(kinds, "sequential")
	if !pm && !slices.Contains(kinds, "keyed") {
		if pm, err = i.pmLayout(ctx, handler, partition, key); err != nil {
			return pauseTarget{}, err
		}
	}
	if pm {
		h, err := i.Handler(ctx, handler)
		if err != nil {
			return pauseTarget{}, err
		}
		return pauseTarget{stream: partition, key: key, mark: rdb.MetaKey(rdb.PMLeaseKey(handler, key)), cats: h.Categories}, nil
	}
	return pauseTarget{stream: partition, key: key, mark: rdb.MetaKey(rdb.LeaseKey(partition, handler)), cats: []string{cat}}, nil
}

func (i *Inspector) pause(ctx context.Context, handler, partition, by string, check bool) (Pause, error) {
	t, err := i.target(ctx, handler, partition)
	if err != nil {
		return Pause{}, fmt.Errorf("pause %s: %w", partition, err)
	}
	partition = t.stream // a bare key named it
	p := Pause{Handler: handler, Partition: partition, Mark: t.mark}
	if check {
		n, ok, err := rdb.GetPause(ctx, i.c, t.mark)
		if err != nil {
			return p, fmt.Errorf("pause %s: %w", partition, err)
		}
		if ok {
			p.By, p.At, p.Already = n.By, n.At, true
		}
		return p, nil
	}
	n, set, err := rdb.SetPause(ctx, i.c, handler, t.mark, rdb.PauseNote{By: by, At: time.Now().UTC(), Partition: partition}, true)
	if err != nil {
		return p, fmt.Errorf("pause %s: %w", partition, err)
	}
	stored := time.Now()
	p.By, p.At, p.Already = n.By, n.At, !set
	// The engines' admitted confirmation age, read after the store was
	// answered: an engine judges a confirmation by the age it had stored
	// before sending it, so one Redis ran before the mark is judged by
	// this age or a smaller one (package lease's admitted ages).
	admitted, aerr := i.admitAge(ctx, handler)
	// Wake the owner: an idle one would find the pause only at its
	// safety-net re-read, and show it (Status, Health, the paused gauge)
	// no sooner. The pause holds either way: it is in the scripts.
	var woke error
	if set {
		woke = i.wake(ctx, t)
	}
	// An attempt whose lease was confirmed just before the mark was
	// stored may still start within the engines' VerifyBound of sending
	// that confirmation, or within their admitted age: wait the longer,
	// and a margin (pauseWait), from the store's reply, on this process's
	// monotonic clock. A pause found in force waits it too: it may have
	// been stored a moment ago, and its note's time is another operator's
	// wall clock.
	if aerr != nil {
		// Read until ctx ended: no time is left to wait.
		return p, fmt.Errorf("pause %s: %w: the engines' admitted confirmation age could not be read (an attempt confirmed over a slow link may start up to half their LeaseTTL after the store): %w", partition, ErrUnsettled, aerr)
	}
	if !sleep.For(ctx, time.Until(stored.Add(pauseWait(i.bound(), admitted)))) {
		return p, fmt.Errorf("pause %s: %w: the wait for attempts confirmed before it was cut short: %w", partition, ErrUnsettled, ctx.Err())
	}
	if woke != nil {
		return p, fmt.Errorf("pause %s: paused (no event starts), but its owner's Status shows the pause only from its next read: %w: %w", partition, ErrNotWoken, woke)
	}
	return p, nil
}

func (i *Inspector) resume(ctx context.Context, handler, partition string, check bool) (Pause, error) {
	t, err := i.target(ctx, handler, partition)
	if errors.Is(err, ErrUnknownHandler) || errors.Is(err, ErrNoPartition) {
		// A mark outlives what it paused when the handler was removed,
		// or its streams deleted, while paused: its listing still
		// names it, and Resume ends it.
		if lt, ok, lerr := i.listedMark(ctx, handler, partition); lerr != nil {
			err = errors.Join(err, lerr)
		} else if ok {
			t, err = lt, nil
		}
	}
	if err != nil {
		return Pause{}, fmt.Errorf("resume %s: %w", partition, err)
	}
	partition = t.stream // a bare key named it
	p := Pause{Handler: handler, Partition: partition, Mark: t.mark}
	var n rdb.PauseNote
	var ok bool
	if check {
		n, ok, err = rdb.GetPause(ctx, i.c, t.mark)
	} else {
		n, ok, err = rdb.ClearPause(ctx, i.c, handler, t.mark, true)
	}
	if err != nil {
		return p, fmt.Errorf("resume %s: %w", partition, err)
	}
	if !ok {
		return p, fmt.Errorf("resume %s of handler %s: %w", partition, handler, ErrNotPaused)
	}
	p.By, p.At = n.By, n.At
	if check {
		return p, nil
	}
	if err := i.wake(ctx, t); err != nil {
		return p, fmt.Errorf("resume %s: resumed, but its owner goes on only at its next read (the idle safety net, a publish to the key, or a handover): %w: %w", partition, ErrNotWoken, err)
	}
	return p, nil
}

// wake signals t's owner on each of its categories, so that it reads the
// partition again (and finds the pause, or its end).
func (i *Inspector) wake(ctx context.Context, t pauseTarget) error {
	for _, cat := range t.cats {
		if err := rdb.WakePartition(ctx, i.c, cat, t.key, replaySignalMaxLen); err != nil {
			return err
		}
	}
	return nil
}

// listedMark finds partition's pause mark among handler's listed ones
// (ok false: none names it).
func (i *Inspector) listedMark(ctx context.Context, handler, partition string) (pauseTarget, bool, error) {
	marks, err := rdb.PausedMarks(ctx, i.c, handler, !i.readOnly)
	if err != nil {
		return pauseTarget{}, false, err
	}
	// A bare key names the one listed mark of a partition with that key.
	bare := !strings.ContainsAny(partition, "{}")
	var found []pauseTarget
	for m, n := range marks {
		cat, key, ok := rdb.ParsePartitionStream(n.Partition)
		if n.Partition != partition && !(bare && ok && key == partition) {
			continue
		}
		t := pauseTarget{stream: n.Partition, mark: m}
		if ok {
			t.key, t.cats = key, []string{cat}
		}
		found = append(found, t)
	}
	switch {
	case len(found) == 1:
		return found[0], true, nil
	case len(found) > 1:
		var names []string
		for _, t := range found {
			names = append(names, t.stream)
		}
		slices.Sort(names)
		return pauseTarget{}, false, fmt.Errorf("%w %q of handler %s: the key names several paused partitions (%s): name the partition stream", ErrNoPartition, partition, handler, strings.Join(names, ", "))
	}
	return pauseTarget{}, false, nil
}

// ErrUnkeyed means the handler has no partitions to pause: its engines
// run it unkeyed (every instance reads every entry of its categories).
var ErrUnkeyed = errors.New("an unkeyed handler has no partitions to pause; stop its engines to stop it")

// keyedHandler refuses an unknown handler, and one its engines' deploy
// records say is unkeyed.
func (i *Inspector) keyedHandler(ctx context.Context, handler string) error {
	if _, err := i.Handler(ctx, handler); err != nil {
		return err
	}
	kinds, err := rdb.DeployKinds(ctx, i.c, handler)
	if err != nil {
		return err
	}
	if slices.Contains(kinds, "unkeyed") {
		return fmt.Errorf("%s: %w", handler, ErrUnkeyed)
	}
	return nil
}

// admitAge reads handler's largest admitted confirmation age, and again
// after a failure, with a backoff (50ms doubling to a second), until ctx
// ends: the mark is stored by then, so giving up at the first failure
// would leave the pause unsettled for a passing error; the last error is
// returned once ctx ended.
func (i *Inspector) admitAge(ctx context.Context, handler string) (time.Duration, error) {
	backoff := 50 * time.Millisecond
	for {
		a, err := rdb.AdmitAge(ctx, i.c, handler)
		if err == nil {
			return a, nil
		}
		if !sleep.For(ctx, backoff) {
			return 0, err
		}
		backoff = min(2*backoff, time.Second)
	}
}

// pauseWait is how long Pause waits after the store of its mark was
// answered: the longest an engine may start an attempt after sending the
// confirmation it starts on (max(bound, admitted)), and a margin. The
// engine counts that age on its own monotonic clock, Pause on another
// machine's: two clocks slewed by NTP (at most 500 ppm each) may differ
// in rate by 1000 ppm, and w/512 is about 1950 ppm of w. The 1ms more
// covers the scheduling between the gate's admit and the handler's call.
// Waiting a little longer costs the operator only that; waiting short
// lets an attempt start after Pause returned. (An engine process stalled
// longer than that right after its admit, by a long GC pause or an
// overloaded host, can still start the attempt later: no wait bounds a
// stall, here as for the lease's own deadline.)
func pauseWait(bound, admitted time.Duration) time.Duration {
	w := max(bound, admitted)
	return w + w/512 + time.Millisecond
}
