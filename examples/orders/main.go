// Command orders demonstrates seqby: two engine instances and a publisher
// share one Redis; interleaved cart events for several clients are applied
// by the Ledger handler one at a time per client, in publish order, whichever
// instance owns each client; and the Fulfilment process manager owns each
// order id across the order and payment categories, its state saved per
// order.
//
//	go run ./examples/orders                  # embedded Redis (miniredis)
//	REDIS_URL=redis://127.0.0.1:6379/0 go run ./examples/orders
//	REDIS_URL=redis://127.0.0.1:7001 go run ./examples/orders   # any node of a cluster
//
// It prints each client's applied events and each order's pm state, and
// exits 1 if any client's order differs from its publish order.
package main

//go:generate go run github.com/seqby/seqby/cmd/seqgen ./...

import (
	"os"
)

func main() {
	os.Exit(run(os.Getenv("REDIS_URL"), os.Stdout, os.Stderr))
}
