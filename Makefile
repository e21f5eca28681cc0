# The one test command is `make test` (README, .ci/run).
GO ?= go
# A count, not a duration: a duration's deadline races the fuzz workers'
# shutdown and, on a loaded machine, fails the run with a bare "context
# deadline exceeded" and no failing input (golang/go#75804, fixed in Go
# 1.27; seen in this project's CI on go1.26.8). 100,000 inputs take about
# 4 s on the 2-core machine.
FUZZTIME ?= 100000x

.PHONY: test redis postgres chromium lint unit runtime-test outbox-test fuzz generate check-generated stress stress-cluster stress-sentinel bench screenshots

test: redis postgres chromium lint check-generated unit runtime-test outbox-test fuzz

redis:
	@./.ci/ensure-redis

postgres:
	@./.ci/ensure-postgres

# The console's browser test drives a headless Chromium (Debian's chromium).
chromium:
	@./.ci/ensure-chromium

# The console's screenshots in docs/console, taken by its browser test.
screenshots: redis chromium
	SEQBY_SCREENSHOTS=$(CURDIR)/docs/console $(GO) test -count=1 -run '^TestBrowser$$' ./runtime/inspect/console

lint:
	$(GO) vet ./...
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

# Everything but the runtime and the outbox (which run under the race
# detector below).
unit:
	$(GO) test -timeout 20m $$($(GO) list ./... | grep -v -e '/runtime' -e '/outbox')

# The guarantee suite runs three times: on a standalone redis-server, on a
# three-master Redis Cluster (SEQBY_TOPOLOGY=cluster) and on a primary with
# two replicas and three sentinels (SEQBY_TOPOLOGY=sentinel, where the
# failover tests run too).
runtime-test:
	$(GO) test -race -timeout 30m ./runtime/...
	SEQBY_TOPOLOGY=cluster $(GO) test -race -count=1 ./runtime/guarantee
	SEQBY_TOPOLOGY=sentinel $(GO) test -race -count=1 ./runtime/guarantee

# The outbox on SQLite and on a private PostgreSQL cluster (internal/pgtest),
# with relays run as separate processes.
outbox-test:
	$(GO) test -race ./outbox/...

fuzz:
	$(GO) test ./annotations -run '^$$' -fuzz FuzzParse -fuzztime $(FUZZTIME)

# seqgen runs once per module, from its root (checks 3-5 need every
# handler of a category in view).
generate:
	$(GO) run ./cmd/seqgen ./...

check-generated:
	$(GO) run ./cmd/seqgen -check ./...

# The multi-process guarantee suite, 20 times in a row; every run must pass.
# One test binary runs all 20, so it needs more than go test's default 10m.
stress:
	$(GO) test -race -count=20 -timeout 40m ./runtime/guarantee

# The same, on a three-master Redis Cluster (the failover tests start their
# own, with a replica per primary).
stress-cluster:
	SEQBY_TOPOLOGY=cluster $(GO) test -race -count=20 -timeout 100m ./runtime/guarantee

# The same, on a primary with two replicas and three sentinels.
stress-sentinel: redis
	SEQBY_TOPOLOGY=sentinel $(GO) test -race -count=20 -timeout 150m ./runtime/guarantee

# Throughput against a private redis-server; results go in docs/benchmarks.md.
# Throughput and Latency share one go test so that Latency's rate=auto is
# half of the 64-key maximum just measured: Throughput's ten cases (1, 8,
# 64, 1,000 and 1,000 Zipf keys; seqby and the plain group) at 100,000
# events, and Latency's six (1,000 ev/s, 5,000 ev/s and rate=auto; seqby
# and plain), each at most 10s of publishing, take about 6-8 minutes for
# the three rounds on the 2-core machine (the Zipf case and the two fixed
# rates of issue #27 about 3 of them).
bench: redis
	$(GO) test ./runtime/bench -run '^$$' -bench 'Publish' -benchtime 5000x -count 3
	$(GO) test ./runtime/bench -run '^$$' -bench 'Throughput|Latency' -benchtime 100000x -count 3 -timeout 30m
	$(GO) test ./runtime/bench -run '^$$' -bench Replicas -benchtime 20000x -count 1
	$(GO) test ./runtime/bench -run '^$$' -bench Claim -benchtime 10000x -count 1
	$(GO) test ./runtime/bench -run '^$$' -bench Idle -benchtime 2000x -count 1
	$(GO) test ./runtime/bench -run '^$$' -bench Idle -benchtime 100000x -count 1 -timeout 30m
	$(GO) test ./runtime/bench -run '^$$' -bench Storage -benchtime 20000x -count 1
	$(GO) test ./runtime/bench -run '^$$' -bench Reap -benchtime 10000x -count 1 -timeout 20m
	$(GO) test ./cmd/seqgen -run '^$$' -bench LargeModule -benchtime 3x -count 1
	$(GO) test ./runtime/inspect/console -run '^$$' -bench Console -benchtime 5x -count 1 -timeout 20m
