package outbox_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync/atomic"
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
// OUTBOX_OWNER, OUTBOX_TTL, OUTBOX_DELAY, OUTBOX_BATCH, and optionally
// OUTBOX_GATE and OUTBOX_HANG_AFTER) and writes JSON log lines to stdout: the relay's own
// (one Debug "outbox: publishing" line per publish, with the time its
// lease was checked) and one "published" line per record PublishRecord
// stored or deduplicated, with the time its Redis call started.
//
// With OUTBOX_GATE set, SIGUSR1 blocks the relay's lease renewals from then on (each waits
// until its context ends), and logs "renewals blocked": only the relay's
// local deadline can then stop it. With OUTBOX_HANG_AFTER=n, every
// publish after the n-th successful one hangs for good (ignoring its
// context), so the round never gets to mark the n records it published.
func relayProcMain() int {
	log := slog.New(slog.NewJSONHandler(os.Stdout, &slog.HandlerOptions{Level: slog.LevelDebug}))
	d := outbox.SQLite
	driverName := "sqlite"
	if os.Getenv("OUTBOX_DIALECT") == "postgres" {
		d, driverName = outbox.Postgres, "pgx"
	}
	db, err := sql.Open(driverName, os.Getenv("OUTBOX_DSN"))
	if err != nil {
		log.Error("open", "err", err)
		return 1
	}
	if os.Getenv("OUTBOX_GATE") != "" {
		// Renewals can be blocked (SIGUSR1). The wrapped connections are
		// not pgx's, so the PostgreSQL relay polls instead of LISTENing.
		gate := &atomic.Bool{}
		gated := sql.OpenDB(gatedConnector{drv: db.Driver(), dsn: os.Getenv("OUTBOX_DSN"), gate: gate})
		db.Close()
		db = gated
		usr1 := make(chan os.Signal, 1)
		signal.Notify(usr1, syscall.SIGUSR1)
		go func() {
			<-usr1
			gate.Store(true)
			log.Info("renewals blocked")
		}()
	}
	defer db.Close()
	rc := redis.NewClient(&redis.Options{Addr: os.Getenv("OUTBOX_REDIS"), ContextTimeoutEnabled: true})
	defer rc.Close()
	ttl, _ := time.ParseDuration(os.Getenv("OUTBOX_TTL"))
	delay, _ := time.ParseDuration(os.Getenv("OUTBOX_DELAY"))
	batch, _ := strconv.Atoi(os.Getenv("OUTBOX_BATCH"))
	hang, _ := strconv.Atoi(os.Getenv("OUTBOX_HANG_AFTER"))
	pub := &slowPublisher{p: runtime.NewPublisher(rc), delay: delay, log: log, hangAfter: int64(hang)}
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
	p         *runtime.Publisher
	delay     time.Duration
	log       *slog.Logger
	hangAfter int64
	done      atomic.Int64
}

func (s *slowPublisher) PublishRecord(ctx context.Context, r runtime.Record) error {
	if s.delay > 0 {
		time.Sleep(s.delay)
	}
	if s.hangAfter > 0 && s.done.Load() >= s.hangAfter {
		s.log.Info("hanging", "message_id", r.MessageID)
		select {} // killed here
	}
	started := time.Now()
	err := s.p.PublishRecord(ctx, r)
	if err == nil {
		s.done.Add(1)
		s.log.Info("published", "message_id", r.MessageID, "key", r.Key, "started", started.Format(time.RFC3339Nano))
	}
	return err
}

// gatedConnector opens drv's connections wrapped so that, once gate is
// set, the relay's lease renewals block until their context ends.
type gatedConnector struct {
	drv  driver.Driver
	dsn  string
	gate *atomic.Bool
}

func (c gatedConnector) Connect(context.Context) (driver.Conn, error) {
	conn, err := c.drv.Open(c.dsn)
	if err != nil {
		return nil, err
	}
	return &gatedConn{Conn: conn, gate: c.gate}, nil
}

func (c gatedConnector) Driver() driver.Driver { return c.drv }

type gatedConn struct {
	driver.Conn
	gate *atomic.Bool
}

func (c *gatedConn) ExecContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Result, error) {
	if c.gate.Load() && strings.Contains(q, "_lease SET expires_at") {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return c.Conn.(driver.ExecerContext).ExecContext(ctx, q, args)
}

func (c *gatedConn) QueryContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Rows, error) {
	return c.Conn.(driver.QueryerContext).QueryContext(ctx, q, args)
}

func (c *gatedConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	return c.Conn.(driver.ConnBeginTx).BeginTx(ctx, opts)
}

func (c *gatedConn) CheckNamedValue(v *driver.NamedValue) error {
	if nc, ok := c.Conn.(driver.NamedValueChecker); ok {
		return nc.CheckNamedValue(v)
	}
	return driver.ErrSkip
}

func (c *gatedConn) ResetSession(ctx context.Context) error {
	if r, ok := c.Conn.(driver.SessionResetter); ok {
		return r.ResetSession(ctx)
	}
	return nil
}

func (c *gatedConn) IsValid() bool {
	if v, ok := c.Conn.(driver.Validator); ok {
		return v.IsValid()
	}
	return true
}
