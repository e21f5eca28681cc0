package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seqby/seqby/examples/quickstart"
	"github.com/seqby/seqby/runtime"
	"github.com/seqby/seqby/runtime/seqbytest"
)

// fencedIncr adds to a balance only while the lease is still the
// caller's: one script checks GET(LeaseKey) == Token and writes, so the
// check and the write cannot be separated by a takeover. The balance's
// key shares the lease key's hash tag, {account}, so the script's keys
// are in one slot on a Redis Cluster too.
var fencedIncr = redis.NewScript(`
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return redis.error_reply("FENCED the lease is no longer this owner's")
end
return redis.call('INCRBY', KEYS[2], ARGV[2])`)

// errFenced means a write was refused: another owner has the account.
var errFenced = errors.New("refused: the lease is no longer this owner's")

// addFenced adds delta to account's balance under lease.
func addFenced(ctx context.Context, rdb redis.UniversalClient, lease runtime.LeaseInfo, account string, delta int64) error {
	err := fencedIncr.Run(ctx, rdb, []string{lease.LeaseKey, "balance:{" + account + "}"}, lease.Token, delta).Err()
	if err != nil && strings.HasPrefix(err.Error(), "FENCED") {
		return fmt.Errorf("add %d to %s: %w", delta, account, errFenced)
	}
	return err
}

// A keyed handler fences an effect that must never land late: an owner
// that stalls past its lease never reads its next event, but the event it
// was in may finish after another owner took the account over. Its
// write, committed in the same script that checks the lease token, is
// refused then.
func ExampleLeaseFromContext() {
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

	leases := make(chan runtime.LeaseInfo, 1)
	ledger := &quickstart.Ledger{Accounts: quickstart.AccountsFunc(func(ctx context.Context, account string, delta int64) error {
		lease, ok := runtime.LeaseFromContext(ctx)
		if !ok {
			return errors.New("no lease: refusing an unfenced write")
		}
		if err := addFenced(ctx, rdb, lease, account, delta); err != nil {
			return err
		}
		leases <- lease
		return nil
	})}
	eng, err := runtime.NewEngine(rdb, runtime.Options{
		Logger:            slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		SkipEvictionCheck: true, // the embedded Redis has no CONFIG; never set it for a real server
	})
	if err == nil {
		err = eng.Register(ledger.SeqbyRegistration())
	}
	if err != nil {
		fmt.Println(err)
		return
	}
	done := make(chan error, 1)
	go func() { done <- eng.Run(ctx) }()
	if err := runtime.NewPublisher(rdb).Publish(ctx, quickstart.Deposited{AccountID: "acc-1", Amount: 100}); err != nil {
		fmt.Println(err)
		return
	}
	var lease runtime.LeaseInfo
	select {
	case lease = <-leases:
	case <-ctx.Done():
		fmt.Println("not handled:", ctx.Err())
		return
	}
	fmt.Println("balance:", rdb.Get(ctx, "balance:{acc-1}").Val())

	// The engine stops and lets the account go: a write under its old
	// lease, as from a handler that ran on after it, is refused.
	cancel()
	if err := <-done; err != nil {
		fmt.Println(err)
	}
	err = addFenced(context.Background(), rdb, lease, "acc-1", 1000)
	fmt.Println("late write refused:", errors.Is(err, errFenced))
	fmt.Println("balance:", rdb.Get(context.Background(), "balance:{acc-1}").Val())
	// Output:
	// balance: 100
	// late write refused: true
	// balance: 100
}
