package outbox_test

import (
	"context"
	"database/sql"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seqby/seqby/outbox"
	"github.com/seqby/seqby/runtime"
)

// relayProcEnv makes the test binary run as a relay process (see
// relayProcMain) instead of running tests: the process tests start
// relays as separate OS processes this way, to SIGKILL and SIGSTOP them.
const relayProcEnv = "SEQBY_OUTBOX_RELAYPROC"

// relayProcMain runs one relay until SIGTERM. It reads its configuration
// from the environment (OUTBOX_DIALECT, OUTBOX_DSN, OUTBOX_REDIS,
// OUTBOX_OWNER, OUTBOX_TTL, OUTBOX_DELAY, OUTBOX_BATCH) and writes JSON
// log lines to stdout: the relay's own (one Debug "outbox: publishing"
// line per publish, with the time its lease was checked) and one
// "published" line per record PublishRecord stored or deduplicated.
func relayProcMain() int {
	log := slog.New(slog.NewJSONHandler(os.Stdout, &slog.HandlerOptions{Level: slog.LevelDebug}))
	d := outbox.SQLite
	driver := "sqlite"
	if os.Getenv("OUTBOX_DIALECT") == "postgres" {
		d, driver = outbox.Postgres, "pgx"
	}
	db, err := sql.Open(driver, os.Getenv("OUTBOX_DSN"))
	if err != nil {
		log.Error("open", "err", err)
		return 1
	}
	defer db.Close()
	rc := redis.NewClient(&redis.Options{Addr: os.Getenv("OUTBOX_REDIS"), ContextTimeoutEnabled: true})
	defer rc.Close()
	ttl, _ := time.ParseDuration(os.Getenv("OUTBOX_TTL"))
	delay, _ := time.ParseDuration(os.Getenv("OUTBOX_DELAY"))
	batch, _ := strconv.Atoi(os.Getenv("OUTBOX_BATCH"))
	pub := &slowPublisher{p: runtime.NewPublisher(rc), delay: delay, log: log}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	r := outbox.NewRelay(db, pub, outbox.RelayOptions{Dialect: d, Owner: os.Getenv("OUTBOX_OWNER"),
		LeaseTTL: ttl, PollInterval: 20 * time.Millisecond, BatchSize: batch, Concurrency: 4, Logger: log})
	if err := r.Run(ctx); err != nil {
		log.Error("run", "err", err)
		return 1
	}
	return 0
}

// slowPublisher publishes through p after a delay, so a test can stop a
// relay in the middle of a batch, and logs each record it stored.
type slowPublisher struct {
	p     *runtime.Publisher
	delay time.Duration
	log   *slog.Logger
}

func (s *slowPublisher) PublishRecord(ctx context.Context, r runtime.Record) error {
	if s.delay > 0 {
		time.Sleep(s.delay)
	}
	err := s.p.PublishRecord(ctx, r)
	if err == nil {
		s.log.Info("published", "message_id", r.MessageID, "key", r.Key)
	}
	return err
}
