package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/seqby/seqby/examples/orders/billing"
	"github.com/seqby/seqby/examples/orders/events"
	"github.com/seqby/seqby/runtime"
)

const (
	clients        = 4
	itemsPerClient = 5
)

// run publishes interleaved cart events for several clients, lets two
// engine instances apply them, and prints each client's applied order.
func run(redisURL string, stdout, stderr io.Writer) int {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))

	if redisURL == "" {
		mr, err := miniredis.Run()
		if err != nil {
			fmt.Fprintf(stderr, "orders: embedded redis: %v\n", err)
			return 1
		}
		defer mr.Close()
		redisURL = "redis://" + mr.Addr()
		fmt.Fprintln(stdout, "using an embedded Redis (miniredis); set REDIS_URL to use a real one")
	}
	// A single Redis or, when the URL names a cluster node, the cluster.
	rdb, err := runtime.Connect(ctx, redisURL)
	if err != nil {
		fmt.Fprintf(stderr, "orders: REDIS_URL: %v\n", err)
		return 2
	}
	defer rdb.Close()

	// One ledger shared by both instances, so the output shows one applied
	// sequence per client whichever instance applied each event.
	ledger := billing.NewLedger()
	var wg sync.WaitGroup
	engineCtx, stop := context.WithCancel(ctx)
	defer func() { stop(); wg.Wait() }()
	for i := range 2 {
		eng, err := runtime.NewEngine(rdb, runtime.Options{
			OwnerID:           fmt.Sprintf("demo-%d-%d", i, time.Now().UnixNano()),
			LeaseTTL:          3 * time.Second,
			DiscoveryInterval: 200 * time.Millisecond,
			Logger:            logger,
		})
		if err == nil {
			err = eng.Register(ledger.SeqbyRegistration(), new(billing.Fulfilment).SeqbyRegistration())
		}
		if err != nil {
			fmt.Fprintf(stderr, "orders: %v\n", err)
			return 1
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := eng.Run(engineCtx); err != nil && !errors.Is(err, context.Canceled) {
				fmt.Fprintf(stderr, "orders: engine %d: %v\n", i, err)
			}
		}()
	}

	pub := runtime.NewPublisher(rdb, runtime.PublisherOptions{})
	want := map[string][]string{}
	for seq := 1; seq <= itemsPerClient; seq++ {
		for c := 1; c <= clients; c++ {
			client := fmt.Sprintf("client-%d", c)
			var msg runtime.Message = events.ItemAdded{ClientID: client, Item: fmt.Sprintf("item-%d", seq), Seq: seq}
			line := fmt.Sprintf("#%d add item-%d", seq, seq)
			if seq == itemsPerClient {
				order := fmt.Sprintf("order-%d", c)
				msg = events.CartCheckedOut{ClientID: client, OrderID: order, Seq: seq}
				line = fmt.Sprintf("#%d checkout %s", seq, order)
			}
			if err := pub.Publish(ctx, msg); err != nil {
				fmt.Fprintf(stderr, "orders: publish: %v\n", err)
				return 1
			}
			want[client] = append(want[client], line)
		}
	}

	// Orders and their payments, interleaved: the Fulfilment pm owns each
	// order id across the order and payment categories.
	for c := 1; c <= clients; c++ {
		order, amount := fmt.Sprintf("order-%d", c), int64(100*c)
		for _, msg := range []runtime.Message{
			events.OrderPlaced{OrderID: order, ClientID: fmt.Sprintf("client-%d", c), Amount: amount},
			events.PaymentReceived{OrderID: order, Amount: amount},
		} {
			if err := pub.Publish(ctx, msg); err != nil {
				fmt.Fprintf(stderr, "orders: publish: %v\n", err)
				return 1
			}
		}
	}

	// A bad key fails the caller's call and writes nothing.
	if err := pub.Publish(ctx, events.ItemAdded{ClientID: "a:b"}); errors.Is(err, runtime.ErrInvalidKey) {
		fmt.Fprintf(stdout, "refused as expected: %v\n", err)
	}

	states := runtime.NewRedisStateStore(rdb)
	deadline := time.NewTicker(50 * time.Millisecond)
	defer deadline.Stop()
	for !done(ledger, want) || !shipped(ctx, states) {
		select {
		case <-ctx.Done():
			fmt.Fprintln(stderr, "orders: timed out waiting for every event to be applied")
			printLedger(stdout, ledger, want)
			return 1
		case <-deadline.C:
		}
	}
	if !printLedger(stdout, ledger, want) {
		return 1
	}
	fmt.Fprintln(stdout, "every client's events were applied in publish order")
	for c := 1; c <= clients; c++ {
		order := fmt.Sprintf("order-%d", c)
		f, err := fulfilment(ctx, states, order)
		if err != nil {
			fmt.Fprintf(stderr, "orders: %v\n", err)
			return 1
		}
		fmt.Fprintf(stdout, "%s: placed=%v paid=%v amount=%d ready=%v\n", order, f.Placed, f.Paid, f.Amount, f.Ready())
	}
	fmt.Fprintln(stdout, "every order was placed and paid: ready to ship")
	return 0
}

// fulfilment loads the Fulfilment pm's saved state for one order.
func fulfilment(ctx context.Context, s runtime.StateStore, order string) (*billing.Fulfilment, error) {
	data, _, err := s.Load(ctx, new(billing.Fulfilment).SeqbyRegistration().Name, order)
	if err != nil {
		return nil, fmt.Errorf("load state of %s: %w", order, err)
	}
	f := new(billing.Fulfilment)
	if data != nil {
		if err := json.Unmarshal(data, f); err != nil {
			return nil, fmt.Errorf("decode state of %s: %w", order, err)
		}
	}
	return f, nil
}

// shipped reports whether every order's pm state is ready to ship.
func shipped(ctx context.Context, s runtime.StateStore) bool {
	for c := 1; c <= clients; c++ {
		f, err := fulfilment(ctx, s, fmt.Sprintf("order-%d", c))
		if err != nil || !f.Ready() {
			return false
		}
	}
	return true
}

func done(l *billing.Ledger, want map[string][]string) bool {
	for client, w := range want {
		if len(l.Applied(client)) < len(w) {
			return false
		}
	}
	return true
}

// printLedger prints each client's applied order and reports whether every
// one matches its publish order.
func printLedger(w io.Writer, l *billing.Ledger, want map[string][]string) bool {
	ok := true
	for c := 1; c <= clients; c++ {
		client := fmt.Sprintf("client-%d", c)
		got := l.Applied(client)
		match := slices.Equal(got, want[client])
		ok = ok && match
		fmt.Fprintf(w, "%s: %v", client, got)
		if !match {
			fmt.Fprintf(w, "  (published %v)", want[client])
		}
		fmt.Fprintln(w)
	}
	return ok
}
