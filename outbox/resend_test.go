package outbox_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seqby/seqby/internal/redistest"
	"github.com/seqby/seqby/outbox"
	"github.com/seqby/seqby/runtime"
)

// The relay's publishes may run twice (issue #39): a relay whose
// publishes lose their reply after Redis ran them (go-redis resends a
// command or a pipeline; the publisher resends a MULTI/EXEC itself)
// stores each record once, in order, and marks every one published.
func TestRelayPublishRunTwice(t *testing.T) {
	dialects(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		var l redistest.LostReply
		rc := redis.NewClient(&redis.Options{Addr: e.redis.Addr, ContextTimeoutEnabled: true, Dialer: l.Dialer(nil)})
		t.Cleanup(func() { rc.Close() })
		// Every third append (a MULTI/EXEC, an XADD, an append_once
		// script) loses its reply, up to 12.
		n := 0
		l.Arm(func(args []string) bool {
			if !strings.EqualFold(args[0], "EXEC") && !strings.EqualFold(args[0], "XADD") && !strings.HasPrefix(strings.ToLower(args[0]), "eval") {
				return false
			}
			n++
			return n%3 == 0
		}, redistest.EOF, 12)
		keys := []string{"c-1", "c-2"}
		const events = 15
		for i := 1; i <= events; i++ {
			for _, k := range keys {
				if err := e.placeOrder(ctx, fmt.Sprintf("%s-%d", k, i), &placed{Client: k, Seq: i}); err != nil {
					t.Fatal(err)
				}
			}
		}
		e.relay(t, runtime.NewPublisher(rc), outbox.RelayOptions{BatchSize: 4, Concurrency: 2})
		eventually(t, 20*time.Second, "every record published", func() bool { return e.pending(t) == 0 })
		if l.Lost() == 0 {
			t.Fatal("no publish lost its reply: the test saw nothing")
		}
		for _, k := range keys {
			if got := seqs(e.stream(t, "order:{"+k+"}")); !slices.Equal(got, upTo(events)) {
				t.Errorf("stream of %s: %v, want 1..%d in order, once each (%d replies lost)", k, got, events, l.Lost())
			}
		}
	})
}
