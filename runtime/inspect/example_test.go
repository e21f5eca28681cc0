package inspect_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seqby/seqby/examples/quickstart"
	"github.com/seqby/seqby/runtime"
	"github.com/seqby/seqby/runtime/inspect"
	"github.com/seqby/seqby/runtime/seqbytest"
)

// An admin job that moves every halted head of one handler to its
// partition's dead-letter stream, where an operator can look at it,
// replay it after a fix, or drop it; the partition goes on with the key's
// later messages. Here the handler is the quick start's Ledger, halted on
// a withdrawal its store refuses.
func ExampleInspector() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	url, stop := seqbytest.EmbeddedRedis() // a service: its REDIS_URL
	defer stop()
	client, err := runtime.Connect(ctx, url)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer client.Close()
	stopEngine, err := haltAnAccount(ctx, client)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer stopEngine()

	in := inspect.New(client)
	halts, err := in.Halts(ctx, "quickstart.ledger")
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, h := range halts {
		res, err := in.MoveToDLQ(ctx, h.Handler, h.Partition, h.EntryID)
		switch {
		case errors.Is(err, inspect.ErrRetrying), errors.Is(err, inspect.ErrNotHalted):
			continue // an owner is on it, or it moved on: look again later
		case err != nil:
			fmt.Println(err)
			return
		}
		fmt.Printf("%s: %s moved to %s\n", h.Partition, h.MessageType, res.DLQ)
	}
	// Output:
	// account:{acc-1}: Withdrawn moved to account:{acc-1}:dlq
}

// haltAnAccount runs the quick start's Ledger on an engine whose store
// refuses a withdrawal, permanently, and returns once the partition of
// the withdrawal's account is halted and its halt record is in Redis.
func haltAnAccount(ctx context.Context, client redis.UniversalClient) (stop func(), err error) {
	ledger := &quickstart.Ledger{Accounts: quickstart.AccountsFunc(func(ctx context.Context, account string, delta int64) error {
		if delta < 0 {
			return runtime.Permanent(errors.New("withdrawals are closed"))
		}
		return nil
	})}
	eng, err := runtime.NewEngine(client, runtime.Options{
		Logger:            slog.New(slog.DiscardHandler), // the halt is expected here; a service logs it
		SkipEvictionCheck: true,                          // the embedded Redis has no CONFIG; never set it for a real server
	})
	if err == nil {
		err = eng.Register(ledger.SeqbyRegistration())
	}
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- eng.Run(ctx) }()
	stop = func() { cancel(); <-done }
	if err := runtime.NewPublisher(client).Publish(ctx, quickstart.Withdrawn{AccountID: "acc-1", Amount: 30}); err != nil {
		stop()
		return nil, err
	}
	in := inspect.New(client)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if hs, err := in.Halts(ctx, "quickstart.ledger"); err == nil && len(hs) > 0 {
			return stop, nil
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			stop()
			return nil, fmt.Errorf("no halt record: %w", ctx.Err())
		}
	}
}
