package wake

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seqby/seqby/runtime/internal/rdb"
)

// Waiter wakes idle partitions without polling them: blocking XREADs on
// the categories' signal streams and on this incarnation's own
// (rdb.OwnerSignalKey), to which the publisher appends the key after the
// entry: to the owners' streams when the partition names its owners
// (rdb.WakeKey), to the category's otherwise. A worker takes Mark before
// its fenced read and, when the read finds nothing, waits for a signal
// counted after that mark: an entry the read missed was appended after
// it, so its signal is read after the mark, and no entry is missed.
//
// Its state stays bounded however long idle partitions wait and however
// many keys are signalled: a key has at most one wake-up channel, shared by
// all its waiters (a wait that times out leaves nothing new behind), a
// sleeping partition at most one callback (Notify; removed when it
// resumes), and the last-signal table forgets old signals (see prune).
type Waiter struct {
	c       redis.UniversalClient
	block   time.Duration
	mu      sync.Mutex
	cursors map[string]string // signal stream -> last id read
	cats    map[string]string // signal stream -> category ("": the owner's stream, whose signals name it)
	// total counts every signal read; a mark is its value.
	total uint64
	// last is the total at a key's latest signal (category \x00 key).
	last map[string]uint64
	// floor: every signal forgotten by prune had a total at most floor.
	floor uint64
	// waiting is each key's wake-up channel, closed (and dropped) by the
	// key's next signal or by Forget.
	waiting map[string]chan struct{}
	// onSignal and onGap are Config's OnSignal and OnGap, called with
	// w.mu held.
	onSignal func(category, key string)
	onGap    func(category string)
	// gaps is, per category, the total at the last time its signals may
	// have been trimmed before they were read: every wait marked before it
	// wakes (see follow).
	gaps map[string]uint64
	// wakers are the callbacks of sleeping partitions (Notify) by key id,
	// called and dropped with the key's wake-up channel; each is one
	// sleeping partition's, removed when it resumes.
	wakers    map[string]map[uint64]func()
	nextWaker uint64
}

// maxSignalled bounds the last-signal table: prune keeps the keys
// signalled within the last maxSignalled signals.
const maxSignalled = 4096

// closedChan is returned to a wait whose signal already came.
var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// Config is what a Waiter needs; New takes it.
type Config struct {
	// Client reads the signal streams.
	Client redis.UniversalClient
	// Block bounds each blocking read, and the pause after a failed one.
	Block time.Duration
	// OnSignal, if set, sees every signal read: the engine's index cache
	// learns of new keys from it. It runs with the waiter's lock held, so
	// it must not call the Waiter.
	OnSignal func(category, key string)
	// OnGap, if set, sees every category whose signals may have been
	// lost; it runs as OnSignal does.
	OnGap func(category string)
}

// New returns a Waiter that follows no stream yet (see Watch, WatchOwn).
func New(cfg Config) *Waiter {
	return &Waiter{c: cfg.Client, block: cfg.Block, onSignal: cfg.OnSignal, onGap: cfg.OnGap,
		cursors: map[string]string{}, cats: map[string]string{},
		last: map[string]uint64{}, waiting: map[string]chan struct{}{}, gaps: map[string]uint64{},
		wakers: map[string]map[uint64]func(){}}
}

// Watch starts following a category's signals from its newest entry. It
// must run before any worker of the category reads.
func (w *Waiter) Watch(ctx context.Context, category string) error {
	sig := rdb.SignalKey(category)
	w.mu.Lock()
	_, ok := w.cursors[sig]
	w.mu.Unlock()
	if ok {
		return nil
	}
	last, err := rdb.LastSignal(ctx, w.c, category)
	if err != nil {
		return err
	}
	w.mu.Lock()
	w.cursors[sig], w.cats[sig] = last, category
	w.mu.Unlock()
	return nil
}

// WatchOwn starts following this incarnation's signal stream from its
// start (a new incarnation's stream holds only signals for it). It must
// run before Run.
func (w *Waiter) WatchOwn(stream string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.cursors[stream]; !ok {
		w.cursors[stream], w.cats[stream] = "0-0", ""
	}
}

// Mark returns the position to wait from: signals counted after it wake a
// later wait. The key is not needed (every key shares the count); it is
// kept so callers read as "mark this key, then wait for it".
func (w *Waiter) Mark(category, key string) uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.total
}

// Wait returns a channel closed by the first signal for the key after seq.
// It may also close early (Forget, or a mark older than the forgotten
// signals): a spurious wake-up only costs the caller one read.
func (w *Waiter) Wait(category, key string, seq uint64) <-chan struct{} {
	id := category + "\x00" + key
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.signalled(id, seq) {
		return closedChan
	}
	ch := w.waiting[id]
	if ch == nil {
		ch = make(chan struct{})
		w.waiting[id] = ch
	}
	return ch
}

// Notify is Wait with a callback instead of a channel, for a partition
// that sleeps without a goroutine: f runs (with w.mu held: it must only
// start work elsewhere) on the first signal for the key after seq, or at
// once if it already came. The returned func removes f if it has not run.
func (w *Waiter) Notify(category, key string, seq uint64, f func()) (cancel func()) {
	id := category + "\x00" + key
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.signalled(id, seq) {
		f()
		return func() {}
	}
	w.nextWaker++
	n := w.nextWaker
	if w.wakers[id] == nil {
		w.wakers[id] = map[uint64]func(){}
	}
	w.wakers[id][n] = f
	return func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		if m := w.wakers[id]; m != nil {
			delete(m, n)
			if len(m) == 0 {
				delete(w.wakers, id)
			}
		}
	}
}

// wakeKey closes the key id's wake-up channel and runs its callbacks;
// w.mu held.
func (w *Waiter) wakeKey(id string) {
	if ch := w.waiting[id]; ch != nil {
		close(ch)
		delete(w.waiting, id)
	}
	for _, f := range w.wakers[id] {
		f()
	}
	delete(w.wakers, id)
}

// Since reports whether the key may have been signalled after seq (a
// signal counted, or one forgotten, after the mark), without waiting.
func (w *Waiter) Since(category, key string, seq uint64) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.signalled(category+"\x00"+key, seq)
}

// signalled is Since for a key id; w.mu held.
func (w *Waiter) signalled(id string, seq uint64) bool {
	if cat, _, ok := strings.Cut(id, "\x00"); ok && w.gaps[cat] > seq {
		return true
	}
	l, ok := w.last[id]
	return (ok && l > seq) || (!ok && w.floor > seq)
}

// gap wakes every wait of the category, marked before now: its signals
// may have been trimmed before they were read; w.mu held.
func (w *Waiter) gap(category string) {
	if w.onGap != nil {
		w.onGap(category) // a lost signal may have been a new key's only one
	}
	w.total++
	w.gaps[category] = w.total
	prefix := category + "\x00"
	for id := range w.waiting {
		if strings.HasPrefix(id, prefix) {
			w.wakeKey(id)
		}
	}
	for id := range w.wakers {
		if strings.HasPrefix(id, prefix) {
			w.wakeKey(id)
		}
	}
}

// Forget wakes and drops the key's waiters, so a key nobody waits on any
// more (its partition was released or lost) leaves no channel behind.
// Anyone else still waiting on the key wakes once and re-reads.
func (w *Waiter) Forget(category, key string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.wakeKey(category + "\x00" + key)
}

// signal counts one signal for the key and wakes its waiters; w.mu held.
func (w *Waiter) signal(category, key string) {
	if w.onSignal != nil {
		w.onSignal(category, key)
	}
	w.count(category, key)
}

// Poke is a signal for the key that no publisher wrote: its owner learnt
// that publishes may have signalled only other owners (it was not named
// in the partition's wake hash yet), so its partitions read once. The index cache, which signals tell of new keys,
// does not see it.
func (w *Waiter) Poke(category, key string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.count(category, key)
}

// count counts one signal for the key and wakes its waiters; w.mu held.
func (w *Waiter) count(category, key string) {
	id := category + "\x00" + key
	w.total++
	w.last[id] = w.total
	w.wakeKey(id)
	if len(w.last) >= 2*maxSignalled {
		w.prune()
	}
}

// prune forgets the keys whose latest signal is more than maxSignalled
// signals old, leaving at most maxSignalled keys. A wait marked before a
// forgotten signal is then woken at once (floor), never missed. Running
// only when the table has doubled keeps the cost per signal constant.
func (w *Waiter) prune() {
	w.floor = w.total - maxSignalled
	for id, l := range w.last {
		if l <= w.floor {
			delete(w.last, id)
		}
	}
}

// Run reads signals until ctx ends, for the categories watched before it
// started. On a single Redis one blocking XREAD covers every category; on a
// cluster each category's signal stream lives in its own slot (XREAD over
// several keys must be single-slot), so each gets its own reader.
func (w *Waiter) Run(ctx context.Context, onErr func(error)) {
	w.mu.Lock()
	var groups [][]string
	for sig := range w.cursors {
		if _, cluster := w.c.(*redis.ClusterClient); cluster || len(groups) == 0 {
			groups = append(groups, nil)
		}
		groups[len(groups)-1] = append(groups[len(groups)-1], sig)
	}
	w.mu.Unlock()
	if len(groups) == 0 {
		<-ctx.Done()
		return
	}
	var wg sync.WaitGroup
	for _, g := range groups {
		wg.Add(1)
		go func() { defer wg.Done(); w.follow(ctx, g, onErr) }()
	}
	wg.Wait()
}

// follow reads the signals of the signal streams sigs until ctx ends.
//
// A signal stream is capped (SignalMaxLen): a reader that falls that far
// behind (a long outage, a stalled process) may find signals trimmed before
// it read them, and XREAD says nothing of it. A read that returned less
// than a full batch was not that far behind. After a full one, the reader
// asks whether the stream's oldest signal is now past the cursor it read
// from: trimming removes the oldest first, so if it is not, nothing after
// the cursor was lost. If it is (or the question fails), every idle
// partition of the category wakes once (gap): a missed signal costs a read
// per partition, never an entry left unread.
func (w *Waiter) follow(ctx context.Context, sigs []string, onErr func(error)) {
	cursors := make(map[string]string, len(sigs))
	for ctx.Err() == nil {
		w.mu.Lock()
		for _, sig := range sigs {
			cursors[sig] = w.cursors[sig]
		}
		w.mu.Unlock()
		got, err := rdb.ReadSignals(ctx, w.c, cursors, w.block)
		if err != nil {
			if ctx.Err() != nil {
				continue
			}
			onErr(err)
			select {
			case <-ctx.Done():
			case <-time.After(w.block):
			}
			continue
		}
		per := map[string]int{}
		for _, sg := range got {
			per[sg.Stream]++
		}
		var lost []string
		for sig, n := range per {
			if n < rdb.SignalBatch {
				continue
			}
			if gone, err := rdb.SignalsLost(ctx, w.c, sig, cursors[sig]); gone || err != nil {
				lost = append(lost, sig)
			}
		}
		w.mu.Lock()
		for _, sig := range lost {
			if cat := w.cats[sig]; cat != "" {
				w.gap(cat)
				continue
			}
			for _, cat := range w.cats { // the owner's stream: any category
				if cat != "" {
					w.gap(cat)
				}
			}
		}
		w.take(got)
		w.mu.Unlock()
	}
}

// take counts the signals read and moves the cursors; w.mu held.
func (w *Waiter) take(got []rdb.Signal) {
	for _, sg := range got {
		w.cursors[sg.Stream] = sg.ID
		cat := w.cats[sg.Stream]
		if cat == "" {
			cat = sg.Category
			if cat == "" {
				continue // the entry that created the owner's stream
			}
		}
		w.signal(cat, sg.Key)
	}
}

// Stats is what a Waiter has counted, as Stats saw it. Tests read it to
// tell which wake-up woke a partition; nothing decides on it.
type Stats struct {
	// Total is the count a Mark returns now: signals read, pokes and gaps.
	Total uint64
	// Gap is the count at the category's last gap, 0 if none.
	Gap uint64
	// Last is the count at the key's latest signal, 0 if none or pruned.
	Last uint64
	// Sleeping is how many callbacks (Notify) wait on the key.
	Sleeping int
}

// Stats returns the counts for category and key.
func (w *Waiter) Stats(category, key string) Stats {
	id := category + "\x00" + key
	w.mu.Lock()
	defer w.mu.Unlock()
	return Stats{Total: w.total, Gap: w.gaps[category], Last: w.last[id], Sleeping: len(w.wakers[id])}
}
