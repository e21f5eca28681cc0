package main

import (
	"bytes"
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seqby/seqby/internal/redistest"
	"github.com/seqby/seqby/runtime"
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
