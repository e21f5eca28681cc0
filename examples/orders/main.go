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
//	REDIS_URL='redis://127.0.0.1:26379/0?master_name=mymaster&addr=127.0.0.1:26380' go run ./examples/orders   # sentinels
//	go run ./examples/orders -metrics-addr 127.0.0.1:9464      # engine B's Prometheus metrics while it runs
//
// The first run compiles 381 packages (pure-Go SQLite, go-redis, pgx,
// Prometheus and OpenTelemetry, an embedded Redis): about 155 CPU seconds,
// a minute and a half on an idle 2-core machine (docs/benchmarks.md);
// later runs start in a few seconds.
//
// Use a Redis (or database) of its own: the demo writes its keys there.
// It exits 0 when the story's facts hold (the takeover happened, every
// client's events were applied once and in publish order, the halt was
// resolved, the replay applied), 1 otherwise, 2 on bad arguments.
package main

//go:generate go run github.com/seqby/seqby/cmd/seqgen ./...

import (
	"errors"
	"fmt"
	"os"
	"strings"
)

func main() {
	if name := os.Getenv(engineEnv); name != "" {
		os.Exit(childMain(name, os.Stdin, os.Stdout, os.Stderr))
	}
	url, err := redisURL(os.LookupEnv)
	if err != nil {
		fmt.Fprintf(os.Stderr, "orders: %v\n", err)
		os.Exit(2)
	}
	os.Exit(run(os.Args[1:], url, os.Stdout, os.Stderr))
}

// errEmptyRedisURL: REDIS_URL is set to nothing. That is most often a
// variable meant to hold a URL that did not (REDIS_URL=$REDIS), so the demo
// asks rather than quietly running on its embedded Redis.
var errEmptyRedisURL = errors.New("REDIS_URL is set but empty: unset it to run on an embedded Redis, or set it to redis://host:port (rediss:// for TLS)")

// redisURL is the Redis URL the demo runs on, from REDIS_URL as lookup
// (os.LookupEnv) reads it: "" when it is not set, for the embedded Redis.
func redisURL(lookup func(string) (string, bool)) (string, error) {
	url, set := lookup("REDIS_URL")
	if set && strings.TrimSpace(url) == "" {
		return "", errEmptyRedisURL
	}
	return strings.TrimSpace(url), nil
}
