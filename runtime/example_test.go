package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/seqby/seqby/examples/quickstart"
	"github.com/seqby/seqby/runtime"
	"github.com/seqby/seqby/runtime/seqbytest"
)

// A service publishes its events with a Publisher. Each event goes to the
// stream of its category and key, account:{acc-1} for account acc-1, in
// publish order; the engine's keyed handlers read them there.
func ExampleNewPublisher() {
	ctx := context.Background()
	url, stop := seqbytest.EmbeddedRedis() // a service: its REDIS_URL
	defer stop()
	rdb, err := runtime.Connect(ctx, url)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer rdb.Close()

	pub := runtime.NewPublisher(rdb)
	for _, e := range []runtime.Message{
		quickstart.Deposited{AccountID: "acc-1", Amount: 100},
		quickstart.Deposited{AccountID: "acc-2", Amount: 5},
		quickstart.Withdrawn{AccountID: "acc-1", Amount: 30},
	} {
		if err := pub.Publish(ctx, e); err != nil {
			fmt.Println(err)
			return
		}
	}

	for _, stream := range []string{"account:{acc-1}", "account:{acc-2}"} {
		entries, err := rdb.XRange(ctx, stream, "-", "+").Result()
		if err != nil {
			fmt.Println(err)
			return
		}
		for _, en := range entries {
			fmt.Println(stream, en.Values["type"])
		}
	}
	// Output:
	// account:{acc-1} Deposited
	// account:{acc-1} Withdrawn
	// account:{acc-2} Deposited
}

// A publish retried after an ambiguous failure (a timeout: was it
// stored?) is stored once when the message carries an idempotency key:
// the same WithMessageID within the publisher's dedup window is not
// written again, and Publish returns nil.
func ExamplePublisher_Publish() {
	ctx := context.Background()
	url, stop := seqbytest.EmbeddedRedis() // a service: its REDIS_URL
	defer stop()
	rdb, err := runtime.Connect(ctx, url)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer rdb.Close()

	pub := runtime.NewPublisher(rdb)
	deposit := quickstart.Deposited{AccountID: "acc-1", Amount: 100}
	for range 2 { // the first try, and its retry
		if err := pub.Publish(ctx, deposit, runtime.WithMessageID("payment-7781")); err != nil {
			fmt.Println(err)
			return
		}
	}
	fmt.Println(rdb.XLen(ctx, "account:{acc-1}").Val(), "entry")
	// Output: 1 entry
}

// A service runs an engine with its handlers registered: Ledger, marked
// //seqby:handler and //seqby:key=account_id, registered with the
// SeqbyRegistration seqgen wrote for it, sees each account's events one
// at a time, in publish order, while the accounts run in parallel.
func ExampleNewEngine() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	url, stop := seqbytest.EmbeddedRedis() // a service: its REDIS_URL
	defer stop()
	rdb, err := runtime.Connect(ctx, url)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer rdb.Close()

	type change struct {
		account string
		delta   int64
	}
	applied := make(chan change)
	ledger := &quickstart.Ledger{Accounts: quickstart.AccountsFunc(func(ctx context.Context, account string, delta int64) error {
		select {
		case applied <- change{account, delta}:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})}

	eng, err := runtime.NewEngine(rdb, runtime.Options{
		Logger:            slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		SkipEvictionCheck: true, // the embedded Redis has no CONFIG; never set it for a real server
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := eng.Register(ledger.SeqbyRegistration()); err != nil {
		fmt.Println(err)
		return
	}
	done := make(chan error, 1)
	go func() { done <- eng.Run(ctx) }()

	pub := runtime.NewPublisher(rdb)
	for _, e := range []runtime.Message{
		quickstart.Deposited{AccountID: "acc-1", Amount: 100},
		quickstart.Deposited{AccountID: "acc-2", Amount: 5},
		quickstart.Withdrawn{AccountID: "acc-1", Amount: 30},
		quickstart.Withdrawn{AccountID: "acc-2", Amount: 5},
	} {
		if err := pub.Publish(ctx, e); err != nil {
			fmt.Println(err)
			return
		}
	}

	// Each account's changes arrive in publish order; how the two
	// accounts interleave is not fixed, so print them per account.
	changes := map[string][]int64{}
	for range 4 {
		select {
		case c := <-applied:
			changes[c.account] = append(changes[c.account], c.delta)
		case <-ctx.Done():
			fmt.Println("not handled:", ctx.Err())
			return
		}
	}
	cancel() // a graceful stop: Run returns nil
	if err := <-done; err != nil {
		fmt.Println(err)
	}
	fmt.Println("acc-1", changes["acc-1"])
	fmt.Println("acc-2", changes["acc-2"])
	// Output:
	// acc-1 [100 -30]
	// acc-2 [5 -5]
}

// A handler reads its message's delivery from its context: here, its
// stream and which attempt this is. The first attempt fails with a
// transient error, so the message runs again. The inline broker runs it
// in process, as the engine would (and retries at once).
func ExampleMessageFromContext() {
	ctx := context.Background()
	ledger := &quickstart.Ledger{Accounts: quickstart.AccountsFunc(func(ctx context.Context, account string, delta int64) error {
		msg, _ := runtime.MessageFromContext(ctx)
		if msg.Attempt == 1 {
			return errors.New("the store is busy") // transient: retried
		}
		fmt.Printf("%s %+d, read from %s, attempt %d\n", account, delta, msg.Stream, msg.Attempt)
		return nil
	})}

	b := runtime.NewInlineBroker()
	if err := b.Register(ledger.SeqbyRegistration()); err != nil {
		fmt.Println(err)
		return
	}
	if err := b.Publish(ctx, quickstart.Deposited{AccountID: "acc-1", Amount: 100}); err != nil {
		fmt.Println(err)
	}
	// Output:
	// acc-1 +100, read from account:{acc-1}, attempt 2
}

// A handler's error is retried, and then halts the key's partition (the
// key's later messages wait behind it, other keys go on). An error that no
// retry can fix, wrapped in runtime.Permanent, halts it at once, with
// its cause still matched by errors.Is.
func ExamplePermanent() {
	ctx := context.Background()
	// errOverdrawn is a failure no retry can pass.
	errOverdrawn := errors.New("insufficient funds")
	balances := map[string]int64{}
	attempts := 0
	ledger := &quickstart.Ledger{Accounts: quickstart.AccountsFunc(func(ctx context.Context, account string, delta int64) error {
		attempts++
		if balances[account]+delta < 0 {
			return runtime.Permanent(fmt.Errorf("withdraw %d from %s with %d: %w", -delta, account, balances[account], errOverdrawn))
		}
		balances[account] += delta
		return nil
	})}

	b := runtime.NewInlineBroker()
	if err := b.Register(ledger.SeqbyRegistration()); err != nil {
		fmt.Println(err)
		return
	}
	err := b.Publish(ctx, quickstart.Withdrawn{AccountID: "acc-1", Amount: 30})
	fmt.Println("overdrawn:", errors.Is(err, errOverdrawn), "permanent:", errors.Is(err, runtime.ErrPermanent), "attempts:", attempts)

	// The account's partition is halted on that withdrawal: its next
	// event waits behind it, for an operator (seqbyctl); other accounts
	// go on.
	_ = b.Publish(ctx, quickstart.Deposited{AccountID: "acc-1", Amount: 100})
	_ = b.Publish(ctx, quickstart.Deposited{AccountID: "acc-2", Amount: 5})
	for _, h := range b.Halts() {
		fmt.Println("halted:", h.Key, h.MessageType, "permanent:", h.Permanent)
	}
	fmt.Println("balances:", balances)
	// Output:
	// overdrawn: true permanent: true attempts: 1
	// halted: acc-1 Withdrawn permanent: true
	// balances: map[acc-2:5]
}
