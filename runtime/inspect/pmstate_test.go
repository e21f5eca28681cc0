package inspect

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"
	"github.com/seqby/seqby/internal/redistest"
	"github.com/seqby/seqby/runtime/internal/rdb"
)

// flowState is a pm's state type as its author writes it.
type flowState struct {
	Seen  int      `json:"seen"`
	Steps []string `json:"steps"`
}

// A pm's state reads back typed, with its version and applied marks, not
// as raw JSON bytes (issue #26): PMState and PMStateOf read the hash the
// engine's state store writes ({value}:__pmstate__:pm), and a pm or value
// without state is an error that says which and why.
func TestPMState(t *testing.T) {
	redistest.Topologies(t, func(t *testing.T, c redis.UniversalClient) {
		ctx := ctxT(t)
		in := New(c)
		if _, err := rdb.RegisterGroup(ctx, c, "ord", "flow", false); err != nil {
			t.Fatal(err)
		}
		// Two saves, as the engine's store makes them: each records the
		// entry it included.
		for v, save := range []rdb.StateSave{
			{PM: "flow", Correlation: "o-1", Data: []byte(`{"seen":1,"steps":["placed"]}`), Stream: "ord:{o-1}", EntryID: "1-0"},
			{PM: "flow", Correlation: "o-1", Data: []byte(`{"seen":2,"steps":["placed","paid"]}`), ExpectVersion: 1, Stream: "pay:{o-1}", EntryID: "2-0"},
		} {
			if saved, _, err := rdb.SaveState(ctx, c, save); err != nil || !saved {
				t.Fatalf("save %d: %v, %v", v, saved, err)
			}
		}
		// A reaper blanks the marks of the lanes it deleted.
		c.HSet(ctx, rdb.StateKey("flow", "o-1"), rdb.AppliedField("ord:{o-1}:backfill"), "")

		got, meta, err := PMStateOf[flowState](ctx, in, "flow", "o-1")
		if err != nil {
			t.Fatal(err)
		}
		if want := (flowState{Seen: 2, Steps: []string{"placed", "paid"}}); !cmp.Equal(got, want) {
			t.Errorf("PMStateOf = %+v, want %+v", got, want)
		}
		wantMeta := PMState{PM: "flow", Value: "o-1", Key: "{o-1}:__pmstate__:flow", Version: 2,
			State:   []byte(`{"seen":2,"steps":["placed","paid"]}`),
			Applied: map[string]string{"ord:{o-1}": "1-0", "pay:{o-1}": "2-0"}}
		if d := cmp.Diff(wantMeta, meta); d != "" {
			t.Errorf("PMStateOf's metadata (-want +got):\n%s", d)
		}
		// A pointer type decodes too.
		if p, _, err := PMStateOf[*flowState](ctx, in, "flow", "o-1"); err != nil || p == nil || p.Seen != 2 {
			t.Errorf("PMStateOf[*flowState] = %+v, %v", p, err)
		}

		for _, tc := range []struct {
			name, pm, value string
			is              error
			say             []string
		}{
			{"unknown pm", "folw", "o-1", ErrUnknownHandler, []string{`"folw"`, `did you mean "flow"`}},
			{"unknown value", "flow", "o-2", ErrNoPMState, []string{`value "o-2"`, "{o-2}:__pmstate__:flow"}},
			{"a partition stream for a value", "flow", "ord:{o-1}", ErrNoPMState, []string{`the correlation value is its key, "o-1"`}},
		} {
			_, _, err := PMStateOf[flowState](ctx, in, tc.pm, tc.value)
			if !errors.Is(err, tc.is) {
				t.Errorf("%s: err %v, want one matching %v", tc.name, err, tc.is)
				continue
			}
			for _, s := range tc.say {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("%s: error %q does not say %q", tc.name, err, s)
				}
			}
		}

		// The wrong type is an error naming it, not a zero value.
		if _, _, err := PMStateOf[[]int](ctx, in, "flow", "o-1"); err == nil || !strings.Contains(err.Error(), "[]int") {
			t.Errorf("PMStateOf[[]int]: %v, want a decode error naming the type", err)
		}
		// A hash not written by an engine.
		c.HSet(ctx, rdb.StateKey("flow", "o-3"), "version", "1", "data", "not json")
		if _, err := in.PMState(ctx, "flow", "o-3"); err == nil || !strings.Contains(err.Error(), "not JSON") {
			t.Errorf("PMState of a non-JSON state: %v", err)
		}
	})
}
