package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"
	"github.com/seqby/seqby/internal/redistest"
	"github.com/seqby/seqby/runtime"
	"github.com/seqby/seqby/runtime/inspect"
)

// flowState is the pm's state: how many placed messages it saw.
type flowState struct {
	Seen int `json:"seen"`
}

// flowRegistration is a sequential pm "flow" on category shop, correlated
// by client; it counts what it applied in seen.
func flowRegistration(seen *atomic.Int64) runtime.Registration {
	return runtime.Registration{Name: "flow", Kind: runtime.ProcessManager, Sequential: true,
		NewState: func() any { return new(flowState) },
		Routes: []runtime.Route{{
			Category: "shop", Type: "placed", PartitionField: "Client", CorrelateField: "Client",
			Decode: func(cd runtime.Codec, p []byte) (any, error) {
				var m placed
				return &m, cd.Unmarshal(p, &m)
			},
			PartitionKey: func(m any) (string, error) { return m.(*placed).PartitionKey() },
			Correlate:    func(m any) (string, error) { return m.(*placed).PartitionKey() },
			Invoke: func(_ context.Context, state any, _ any) error {
				state.(*flowState).Seen++
				seen.Add(1)
				return nil
			},
		}}}
}

// inspect of a sequential pm's partition stream that is not halted shows
// the pm's lease on the correlation value, held by the engine, not the
// keyed layout's lease key as free (issue #23); -category takes the bare
// key.
func TestInspectPMLease(t *testing.T) {
	srv := redistest.New(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { c.Close() })
	t.Setenv("REDIS_URL", "redis://"+srv.Addr)
	var seen atomic.Int64
	stop, err := runEngine(c, flowRegistration(&seen))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	if err := runtime.NewPublisher(c).Publish(context.Background(), &placed{Client: "a", Seq: 1}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "the pm to apply shop:{a}'s message", func() bool { return seen.Load() == 1 })

	for _, args := range [][]string{
		{"inspect", "-handler", "flow", "-stream", "shop:{a}"},
		{"inspect", "-handler", "flow", "-category", "shop", "-stream", "a"},
	} {
		var out, errb bytes.Buffer
		code := run(args, &out, &errb)
		t.Logf("seqbyctl %s\n%s%s", strings.Join(args, " "), out.String(), errb.String())
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errb.String())
		}
		for _, want := range []string{
			"partition  a (a pm's correlation value: one lease over its streams below)\n",
			"halted     no (no halt record)\n",
			"lease      {a}:__pmlease__:flow held by w1", // the engine's token, <owner>:<generation>
			"stream     shop:{a}: length ",
		} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("seqbyctl %s: stdout lacks %q", strings.Join(args, " "), want)
			}
		}
	}
}

// state shows a pm's stored state as indented JSON with its metadata
// (issue #26: it was readable only as raw bytes, through the state store),
// and -json prints it as an object; a value without state, or a pm name
// no engine registered, is one error that says so (exit 1).
func TestPMStateCommand(t *testing.T) {
	srv := redistest.New(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { c.Close() })
	t.Setenv("REDIS_URL", "redis://"+srv.Addr)
	var seen atomic.Int64
	stop, err := runEngine(c, flowRegistration(&seen))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	for seq := 1; seq <= 2; seq++ {
		if err := runtime.NewPublisher(c).Publish(context.Background(), &placed{Client: "a", Seq: seq}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 20*time.Second, "the pm to apply shop:{a}'s two messages", func() bool { return seen.Load() == 2 })
	// The entry the state includes, as the engine recorded it (the
	// stream's applied entries may be trimmed by now).
	last, err := c.HGet(context.Background(), "{a}:__pmstate__:flow", "applied:shop:{a}").Result()
	if err != nil || last == "" {
		t.Fatalf("applied mark of shop:{a}: %q, %v", last, err)
	}

	for _, tc := range []struct {
		args       []string
		code       int
		stdout     []string // each a line, in this order
		stderr     string
		jsonResult *inspect.PMState
	}{
		{args: []string{"state", "-handler", "flow", "-value", "a"},
			stdout: []string{"pm       flow", "value    a", "key      {a}:__pmstate__:flow", "version  2",
				"applied  shop:{a} up to " + last, "state", "  {", `    "seen": 2`, "  }"}},
		{args: []string{"state", "-handler", "flow", "-value", "a", "-json"},
			jsonResult: &inspect.PMState{PM: "flow", Value: "a", Key: "{a}:__pmstate__:flow", Version: 2,
				State: []byte(`{"seen":2}`), Applied: map[string]string{"shop:{a}": last}}},
		{args: []string{"state", "-handler", "flow", "-value", "b"}, code: 1,
			stderr: `seqbyctl state: no pm state stored for pm flow and value "b" (no {b}:__pmstate__:flow): `},
		{args: []string{"state", "-handler", "flwo", "-value", "a"}, code: 1,
			stderr: `seqbyctl state: unknown handler "flwo" (did you mean "flow"?)`},
		{args: []string{"state", "-handler", "flow"}, code: 2, stderr: "seqbyctl state: missing -value"},
	} {
		var out, errb bytes.Buffer
		code := run(tc.args, &out, &errb)
		name := "seqbyctl " + strings.Join(tc.args, " ")
		t.Logf("%s\n%s%s", name, out.String(), errb.String())
		if code != tc.code {
			t.Errorf("%s: exit %d, want %d", name, code, tc.code)
		}
		if tc.stdout != nil {
			if want := strings.Join(tc.stdout, "\n") + "\n"; out.String() != want {
				t.Errorf("%s: stdout\n%s\nwant\n%s", name, out.String(), want)
			}
		}
		if tc.jsonResult != nil {
			var got inspect.PMState
			if err := json.Unmarshal(out.Bytes(), &got); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			var compact bytes.Buffer
			json.Compact(&compact, got.State)
			got.State = compact.Bytes()
			if d := cmp.Diff(*tc.jsonResult, got); d != "" {
				t.Errorf("%s: (-want +got)\n%s", name, d)
			}
		}
		if tc.stderr != "" && !strings.HasPrefix(errb.String(), tc.stderr) {
			t.Errorf("%s: stderr %q, want it to begin %q", name, errb.String(), tc.stderr)
		}
		if tc.stderr == "" && errb.Len() > 0 {
			t.Errorf("%s: stderr %q, want none", name, errb.String())
		}
	}
}
