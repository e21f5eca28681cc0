package redistest

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// Is names a command by its name (any case), for LostReply.Arm.
func is(name string) Match {
	return func(args []string) bool { return strings.EqualFold(args[0], name) }
}

// A lost reply's call ran in Redis, and go-redis, which resends a call
// whose reply it failed to read, runs it again: a single command and a
// pipeline, for each fault. A MULTI/EXEC it does not resend (v9.23: "the
// batch was written and may have committed"): the caller gets the fault,
// though the transaction ran. With retries off the client sees the fault
// itself.
func TestLostReplyRunsACallTwice(t *testing.T) {
	s := New(t)
	ctx := context.Background()
	for _, fault := range Faults {
		t.Run(fault.String(), func(t *testing.T) {
			var l LostReply
			c := redis.NewClient(&redis.Options{Addr: s.Addr, Dialer: l.Dialer(nil)})
			defer c.Close()
			key := "n:" + fault.String()

			l.Arm(is("INCR"), fault, 1)
			if n, err := c.Incr(ctx, key).Result(); err != nil || n != 2 {
				t.Errorf("INCR: %d %v, want 2 (run twice), no error", n, err)
			}

			l.Arm(is("INCR"), fault, 1)
			p := c.Pipeline()
			p.Set(ctx, key+":p", "x", 0)
			incr := p.Incr(ctx, key)
			if _, err := p.Exec(ctx); err != nil || incr.Val() != 4 {
				t.Errorf("pipeline: %d %v, want 4, no error", incr.Val(), err)
			}

			l.Arm(is("EXEC"), fault, 1)
			tx := c.TxPipeline()
			tx.Incr(ctx, key)
			if _, err := tx.Exec(ctx); err == nil {
				t.Errorf("MULTI/EXEC: no error, want the fault (go-redis resends no transaction)")
			}
			if n, err := c.Get(ctx, key).Int(); err != nil || n != 5 {
				t.Errorf("after MULTI/EXEC: %d %v, want 5 (run once)", n, err)
			}
			if l.Lost() != 3 || l.Armed() != 0 {
				t.Errorf("lost %d, armed %d; want 3, 0", l.Lost(), l.Armed())
			}

			// Without retries the fault reaches the caller, and the call
			// ran once.
			once := redis.NewClient(&redis.Options{Addr: s.Addr, Dialer: l.Dialer(nil), MaxRetries: -1})
			defer once.Close()
			l.Arm(is("INCR"), fault, 1)
			_, err := once.Incr(ctx, key).Result()
			var ne interface{ Timeout() bool }
			switch {
			case fault == EOF && !errors.Is(err, io.EOF),
				fault == Reset && (!errors.As(err, &ne) || ne.Timeout()),
				fault == Timeout && (!errors.As(err, &ne) || !ne.Timeout()):
				t.Errorf("without retries: %v, want the %v fault", err, fault)
			}
			if n, err := c.Get(ctx, key).Int(); err != nil || n != 6 {
				t.Errorf("after the unretried INCR: %d %v, want 6", n, err)
			}
		})
	}
}

// Calls that match no armed rule go through untouched, and a rule is
// spent after its count.
func TestLostReplyLeavesOtherCalls(t *testing.T) {
	s := New(t)
	ctx := context.Background()
	var l LostReply
	c := redis.NewClient(&redis.Options{Addr: s.Addr, Dialer: l.Dialer(nil)})
	defer c.Close()
	l.Arm(is("INCR"), EOF, 1)
	for range 3 {
		if err := c.Set(ctx, "k", strings.Repeat("v", 100_000), 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if v, err := c.Get(ctx, "k").Result(); err != nil || len(v) != 100_000 {
		t.Fatalf("GET: %d bytes, %v", len(v), err)
	}
	if l.Lost() != 0 {
		t.Fatalf("lost %d, want 0", l.Lost())
	}
	c.Incr(ctx, "n")
	c.Incr(ctx, "n")
	if n, _ := c.Get(ctx, "n").Int(); n != 3 || l.Lost() != 1 {
		t.Fatalf("n %d, lost %d; want 3 (one INCR run twice), 1", n, l.Lost())
	}
}
