package runtime

import (
	"context"
	"errors"
	"fmt"

	"github.com/seqby/seqby/internal/poll"
	"github.com/seqby/seqby/internal/redistest"
)

// newRedis starts a private redis-server for the test and returns a client.
var newRedis = redistest.NewClient

// eventually polls cond until it holds; the test fails if it does not
// within the duration.
var eventually = poll.Until

// testEvent is a message of the partitioned category "order".
type testEvent struct {
	Client string `json:"client"`
	Seq    int    `json:"seq"`
	Poison bool   `json:"poison,omitempty"`
}

func (*testEvent) StreamCategory() string { return "order" }
func (e *testEvent) PartitionKey() (string, error) {
	return e.Client, CheckKey("order", "Client", e.Client)
}

// testNote is a message of the unpartitioned category "note".
type testNote struct {
	Text string `json:"text"`
}

func (*testNote) StreamCategory() string { return "note" }

var errPoison = errors.New("poison")

// orderRoute builds a Route for testEvent calling fn.
func orderRoute(field string, fn func(ctx context.Context, e *testEvent) error) Route {
	r := Route{
		Category: "order",
		Type:     "testEvent",
		Decode: func(c Codec, p []byte) (any, error) {
			var e testEvent
			if err := c.Unmarshal(p, &e); err != nil {
				return nil, err
			}
			return &e, nil
		},
		Invoke: func(ctx context.Context, _ any, m any) error { return fn(ctx, m.(*testEvent)) },
	}
	if field != "" {
		r.PartitionField = field
		r.PartitionKey = func(m any) (string, error) { return m.(*testEvent).PartitionKey() }
	}
	return r
}

// keyedHandler is a Registration sequential by Client on "order".
func keyedHandler(name string, fn func(ctx context.Context, e *testEvent) error) Registration {
	return Registration{Name: name, Kind: EventHandler, Key: "Client", Sequential: true,
		Routes: []Route{orderRoute("Client", fn)}}
}

// ctxT is a context for a test's Redis calls.
var ctxT = redistest.Context

func ev(client string, seq int) *testEvent { return &testEvent{Client: client, Seq: seq} }

func seqKey(client string, seq int) string { return fmt.Sprintf("%s/%d", client, seq) }
