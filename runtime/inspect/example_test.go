package inspect_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
	"github.com/seqby/seqby/runtime/inspect"
)

// An admin job that moves every halted head of one handler to its
// partition's dead-letter stream.
func ExampleInspector() {
	ctx := context.Background()
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	in := inspect.New(client)
	halts, err := in.Halts(ctx, "example.com/shop/billing.Billing")
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
		fmt.Printf("%s: %s moved to %s\n", h.Partition, h.EntryID, res.DLQ)
	}
}
