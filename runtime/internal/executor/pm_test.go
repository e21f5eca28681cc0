package executor

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/seqby/seqby/runtime/internal/rdb"
)

// flow is the tests' pm state: the sequence numbers applied.
type flow struct{ Seqs []int }

// pm adds a pm "flow" over store, recording each call in calls.
func pm(store *memStore, calls *int) *Executor {
	cfg := fast(nil)
	cfg.States, cfg.LoadApplied = store, store.loadApplied
	x := New(cfg)
	x.Add(Handler{Name: "flow", Kind: "process manager", PM: true, NewState: func() any { return &flow{} },
		Routes: []Route{route(func(ctx context.Context, state any, e *event) error {
			*calls++
			if corr, _ := CorrelationFrom(ctx); corr != e.Client {
				return errors.New("no correlation value in the context")
			}
			f := state.(*flow)
			f.Seqs = append(f.Seqs, e.Seq)
			return nil
		})}})
	return x
}

func (s *memStore) flow(t *testing.T) []int {
	t.Helper()
	var f flow
	if err := json.Unmarshal(s.data, &f); err != nil {
		t.Fatal(err)
	}
	return f.Seqs
}

// TestPMEntryAppliedOnceAcrossLostAck: an owner that saved a pm's state and
// died before its ack leaves the entry pending; the next owner gets it
// again. A store that records the entry with the state lets the second
// delivery be acked without being applied twice.
func TestPMEntryAppliedOnceAcrossLostAck(t *testing.T) {
	store, calls := &memStore{}, 0
	x := pm(store, &calls)
	rt := x.mustHandler("flow").Routes[0]
	apply := func(id string, seq int) {
		t.Helper()
		en := rdb.Entry{Stream: "order:{o-1}", ID: id}
		ctx := WithCorrelation(context.Background(), "o-1")
		if _, err := x.ApplyPM(ctx, "flow", rt, "o-1", &event{Client: "o-1", Seq: seq}, &en); err != nil {
			t.Fatal(err)
		}
	}
	apply("5-0", 1)
	apply("5-0", 1) // redelivered: its ack was lost
	apply("12-3", 2)
	apply("12-3", 2)
	apply("5-0", 1) // older than what the state includes
	if f := store.flow(t); !slices.Equal(f, []int{1, 2}) || store.version != 2 || calls != 2 {
		t.Errorf("seqs %v at version %d after %d calls; want [1 2] at version 2 after 2 calls", f, store.version, calls)
	}
}

// A pm that is not sequential reloads and runs again when its save meets
// a concurrent one, with the correlation value in its context.
func TestOptimisticPMReloadsOnConflict(t *testing.T) {
	store, calls := &memStore{conflicts: 2}, 0
	x := pm(store, &calls)
	out, h := x.Handle(context.Background(), nil, x.Slots(), "flow", "order", entry("1-0", event{Client: "o-1", Seq: 7}), false)
	if out != OutDone || h != nil {
		t.Fatalf("outcome %v, halt %+v", out, h)
	}
	if f := store.flow(t); !slices.Equal(f, []int{7}) || calls != 3 {
		t.Errorf("seqs %v after %d calls; want [7] after 3", f, calls)
	}
	if len(store.applied) != 0 {
		t.Errorf("a pm that is not sequential recorded applied entries: %v", store.applied)
	}
}
