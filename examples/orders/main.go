// Command orders is seqby's demo, told as a short story: two engines, A (a
// child process) and B (this process), share one Redis and apply six
// clients' cart events, sequential per client and in parallel across
// clients; A is killed (SIGKILL) in the middle of a run and B takes its
// clients over with nothing lost or reordered; a poison event halts only
// its client until an operator command moves it to the dead-letter
// stream, and once the fix is in, the operator replays it and the Ledger's
// journal applies it although it now comes after the client's later
// events (a replay is no duplicate: runtime.MessageInfo.Replay); and the
// Fulfilment process manager follows each order across the order and
// payment categories.
//
//	go run ./examples/orders                  # embedded Redis (miniredis)
//	REDIS_URL=redis://127.0.0.1:6379/0 go run ./examples/orders
//	REDIS_URL=redis://127.0.0.1:7001 go run ./examples/orders   # any node of a cluster
//	go run ./examples/orders -metrics-addr 127.0.0.1:9464      # engine B's Prometheus metrics while it runs
//
// Use a Redis (or database) of its own: the demo writes its keys there.
// It exits 0 when the story's facts hold (the takeover happened, every
// client's events were applied once and in publish order, the halt was
// resolved, the replay applied), 1 otherwise, 2 on bad arguments.
package main

//go:generate go run github.com/seqby/seqby/cmd/seqgen ./...

import (
	"os"
)

func main() {
	if name := os.Getenv(engineEnv); name != "" {
		os.Exit(runEngine(name, os.Getenv(redisEnv), os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(run(os.Args[1:], os.Getenv("REDIS_URL"), os.Stdout, os.Stderr))
}
