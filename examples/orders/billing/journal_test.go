package billing_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seqby/seqby/examples/orders/billing"
	"github.com/seqby/seqby/examples/orders/events"
	"github.com/seqby/seqby/internal/poll"
	"github.com/seqby/seqby/internal/redistest"
	"github.com/seqby/seqby/runtime"
	"github.com/seqby/seqby/runtime/inspect"
)

// failing is a Journal that refuses event #seq, permanently, while down
// is set: an outage that halts the client's partition on that event.
type failing struct {
	billing.Journal
	seq  int
	down atomic.Bool
}

func (f *failing) Append(ctx context.Context, client string, seq int, entry string) error {
	if seq == f.seq && f.down.Load() {
		return runtime.Permanent(errors.New("the journal refused the event"))
	}
	return f.Journal.Append(ctx, client, seq, entry)
}

func newClient(t *testing.T) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: redistest.New(t).Addr, ContextTimeoutEnabled: true})
	t.Cleanup(func() { c.Close() })
	return c
}

// start runs an engine with regs on c until the test ends.
func start(t *testing.T, c redis.UniversalClient, regs ...runtime.Registration) {
	t.Helper()
	e, err := runtime.NewEngine(c, runtime.Options{OwnerID: "w1", LeaseTTL: time.Second,
		HeartbeatInterval: 150 * time.Millisecond, DiscoveryInterval: 50 * time.Millisecond,
		BlockTimeout: 200 * time.Millisecond, Retry: runtime.RetryPolicy{MaxRetries: 3, RetryBackoff: 5 * time.Millisecond, MaxBackoff: 20 * time.Millisecond},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Register(regs...); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}

func publish(t *testing.T, c redis.UniversalClient, client string, items ...string) {
	t.Helper()
	p := runtime.NewPublisher(c)
	for i, item := range items {
		if err := p.Publish(context.Background(), events.ItemAdded{ClientID: client, Item: item, Seq: i + 1}); err != nil {
			t.Fatal(err)
		}
	}
}

// deadLetterHead waits for handler to halt on client's stream and moves
// the head to the dead-letter stream, as seqbyctl dlq does.
func deadLetterHead(t *testing.T, c redis.UniversalClient, handler, client string) inspect.Resolution {
	t.Helper()
	in := inspect.New(c)
	var hs []inspect.HaltRecord
	poll.Until(t, 20*time.Second, handler+" to halt", func() bool {
		var err error
		hs, err = in.Halts(context.Background(), handler)
		return err == nil && len(hs) == 1
	})
	res, err := in.MoveToDLQ(context.Background(), handler, hs[0].Partition, hs[0].EntryID)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// seqs returns the sequence numbers the journal applied for client, in
// order, from its entries ("w1 #3 add item-3").
func seqs(t *testing.T, j billing.RedisJournal, client string) []string {
	t.Helper()
	es, err := j.Applied(context.Background(), client)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		if f := strings.Fields(e); len(f) > 1 {
			out = append(out, f[1])
		}
	}
	return out
}

// again is a Journal that fails a replay once after writing it: the
// engine runs the replay again, as it would after an owner crashed
// between the journal's write and the ack.
type again struct {
	billing.Journal
	done atomic.Bool
}

func (a *again) Append(ctx context.Context, client string, seq int, entry string) error {
	err := a.Journal.Append(ctx, client, seq, entry)
	if mi, _ := runtime.MessageFromContext(ctx); err == nil && mi.Replay != nil && a.done.CompareAndSwap(false, true) {
		return errors.New("lost before the ack")
	}
	return err
}

// The demo's journal skips an event re-run by its sequence number, so a
// replayed event, which comes after the client's later events with its
// old number, used to be dropped as a duplicate (issue #23, finding 9).
// The Ledger halts on #2 (its journal refuses it), the operator moves it
// to the dead-letter stream, #3 is applied, the outage ends and the
// operator replays #2: the journal applies it, after #3, once.
func TestJournalAppliesAReplay(t *testing.T) {
	c := newClient(t)
	ctx := context.Background()
	j := billing.RedisJournal{C: c}
	journal := &failing{Journal: j, seq: 2}
	journal.down.Store(true)
	ledger := &billing.Ledger{Engine: "w1", Journal: journal}
	reg := ledger.SeqbyRegistration()
	start(t, c, reg)
	publish(t, c, "client-1", "item-1", "item-2", "item-3")

	res := deadLetterHead(t, c, reg.Name, "client-1")
	poll.Until(t, 20*time.Second, "#3 applied past the dead-lettered #2", func() bool {
		return slices.Equal(seqs(t, j, "client-1"), []string{"#1", "#3"})
	})
	journal.down.Store(false)
	if _, err := inspect.New(c).ReplayDLQ(ctx, res.DLQ, res.DLQEntryID); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 20*time.Second, "the journal to take the replayed #2", func() bool {
		dups, _ := j.Duplicates(ctx, "client-1")
		return len(seqs(t, j, "client-1")) == 3 || dups > 0
	})
	if got, want := seqs(t, j, "client-1"), []string{"#1", "#3", "#2"}; !slices.Equal(got, want) {
		dups, _ := j.Duplicates(ctx, "client-1")
		t.Fatalf("journal of client-1 %v (%d duplicates skipped); want %v: the replayed #2 applied after #3", got, dups, want)
	}
	if dups, _ := j.Duplicates(ctx, "client-1"); dups != 0 {
		t.Fatalf("%d duplicates skipped; want none", dups)
	}
}

// Every handler of the category gets a replay: the one that halted on the
// event applies it once, however often it is delivered, and another one,
// which applied the event in its place, skips it as a duplicate by its
// sequence number, as it would a re-run.
func TestJournalReplayOfAnotherHandler(t *testing.T) {
	c := newClient(t)
	ctx := context.Background()
	j, other := billing.RedisJournal{C: c}, billing.RedisJournal{C: c, Prefix: "other"}
	fixed := new(billing.Catalogue)
	fixed.Add("poison") // the other ledger knows the item from the start
	var catalogue billing.Catalogue
	journal := &again{Journal: j}
	reg := (&billing.Ledger{Engine: "w1", Journal: journal, Catalogue: &catalogue}).SeqbyRegistration()
	otherReg := (&billing.Ledger{Engine: "w1", Journal: other, Catalogue: fixed}).SeqbyRegistration()
	otherReg.Name += ".other"
	start(t, c, reg, otherReg)
	publish(t, c, "client-1", "item-1", "poison", "item-3")

	res := deadLetterHead(t, c, reg.Name, "client-1")
	poll.Until(t, 20*time.Second, "both ledgers past #2", func() bool {
		return slices.Equal(seqs(t, j, "client-1"), []string{"#1", "#3"}) && slices.Equal(seqs(t, other, "client-1"), []string{"#1", "#2", "#3"})
	})
	catalogue.Add("poison") // the fix
	if _, err := inspect.New(c).ReplayDLQ(ctx, res.DLQ, res.DLQEntryID); err != nil {
		t.Fatal(err)
	}
	// The halted ledger writes the replay, fails, runs it again: a
	// duplicate of the replay. The other ledger skips it once.
	poll.Until(t, 20*time.Second, "both ledgers to take the replay", func() bool {
		dups, _ := j.Duplicates(ctx, "client-1")
		otherDups, _ := other.Duplicates(ctx, "client-1")
		return dups == 1 && otherDups == 1
	})
	if got, want := seqs(t, j, "client-1"), []string{"#1", "#3", "#2"}; !slices.Equal(got, want) {
		t.Fatalf("the halted ledger's journal %v; want %v: the replay applied once, after #3", got, want)
	}
	if got, want := seqs(t, other, "client-1"), []string{"#1", "#2", "#3"}; !slices.Equal(got, want) {
		t.Fatalf("the other ledger's journal %v; want %v: the replay is a duplicate of the #2 it applied", got, want)
	}
	es, _ := j.Applied(ctx, "client-1")
	if last := es[len(es)-1]; !strings.HasSuffix(last, "(replay of "+res.Record.EntryID+")") {
		t.Fatalf("the replay's journal entry %q does not name the original entry %s", last, res.Record.EntryID)
	}
}
