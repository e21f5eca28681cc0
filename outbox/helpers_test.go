package outbox_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"
	"github.com/redis/go-redis/v9"
	_ "modernc.org/sqlite"

	"github.com/seqby/seqby/internal/pgtest"
	"github.com/seqby/seqby/internal/poll"
	"github.com/seqby/seqby/internal/redistest"
	"github.com/seqby/seqby/outbox"
	"github.com/seqby/seqby/runtime"
)

// placed is a message of the partitioned category "order".
type placed struct {
	Client string `json:"client"`
	Seq    int    `json:"seq"`
}

func (*placed) StreamCategory() string { return "order" }
func (p *placed) PartitionKey() (string, error) {
	return runtime.Key("order", "Client", p.Client)
}

// note is a message of the unpartitioned category "note".
type note struct {
	Seq int `json:"seq"`
}

func (*note) StreamCategory() string { return "note" }

func TestMain(m *testing.M) {
	if os.Getenv(relayProcEnv) != "" {
		os.Exit(relayProcMain())
	}
	code := m.Run()
	pgMu.Lock()
	if pgServer != nil {
		pgServer.Close()
	}
	pgMu.Unlock()
	os.Exit(code)
}

// One PostgreSQL cluster serves the package's tests, a database each.
var (
	pgMu     sync.Mutex
	pgServer *pgtest.Server
	pgErr    error
)

func postgresDSN(t *testing.T) string {
	t.Helper()
	pgMu.Lock()
	defer pgMu.Unlock()
	if pgServer == nil && pgErr == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		pgServer, pgErr = pgtest.Start(ctx)
		cancel()
	}
	if errors.Is(pgErr, pgtest.ErrNoPostgres) {
		t.Skip(pgErr.Error())
	}
	if pgErr != nil {
		t.Fatal(pgErr)
	}
	dsn, err := pgServer.CreateDatabase(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return dsn
}

// env is one test's database and Redis.
type env struct {
	d      outbox.Dialect
	driver string
	dsn    string
	db     *sql.DB
	ob     *outbox.Outbox
	redis  *redistest.Server
	rc     *redis.Client
	pub    *runtime.Publisher
}

// dialects runs f against SQLite and against PostgreSQL, each with a
// migrated outbox, a business table "orders" and a private Redis.
func dialects(t *testing.T, f func(t *testing.T, e *env)) {
	for _, d := range []outbox.Dialect{outbox.SQLite, outbox.Postgres} {
		t.Run(d.String(), func(t *testing.T) {
			f(t, newEnv(t, d, true))
		})
	}
}

func sqliteDSN(t *testing.T) string {
	return "file:" + filepath.Join(t.TempDir(), "outbox.db") + "?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)"
}

func newEnv(t *testing.T, d outbox.Dialect, migrate bool) *env {
	t.Helper()
	e := &env{d: d}
	if d == outbox.Postgres {
		e.driver, e.dsn = "pgx", postgresDSN(t)
	} else {
		e.driver, e.dsn = "sqlite", sqliteDSN(t)
	}
	db, err := sql.Open(e.driver, e.dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	e.db = db
	ctx := context.Background()
	if migrate {
		if err := outbox.Migrate(ctx, db, d); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE orders (id TEXT PRIMARY KEY, client TEXT NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	e.ob = outbox.New(outbox.Options{Dialect: d})
	e.redis = redistest.New(t)
	e.rc = redis.NewClient(&redis.Options{Addr: e.redis.Addr, ContextTimeoutEnabled: true})
	t.Cleanup(func() { e.rc.Close() })
	e.pub = runtime.NewPublisher(e.rc)
	return e
}

// q rebinds ? placeholders for the dialect.
func (e *env) q(query string) string {
	if e.d != outbox.Postgres {
		return query
	}
	out, n := []byte{}, 0
	for i := 0; i < len(query); i++ {
		if query[i] == '?' {
			n++
			out = append(out, fmt.Sprintf("$%d", n)...)
			continue
		}
		out = append(out, query[i])
	}
	return string(out)
}

// placeOrder is a business transaction: an order row and its event.
func (e *env) placeOrder(ctx context.Context, id string, msg runtime.Message) error {
	tx, err := e.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, e.q(`INSERT INTO orders (id, client) VALUES (?, ?)`), id, fmt.Sprint(msg)); err != nil {
		return err
	}
	if _, err := e.ob.Add(ctx, tx, msg); err != nil {
		return err
	}
	return tx.Commit()
}

func (e *env) count(t *testing.T, query string, args ...any) int {
	t.Helper()
	var n int
	if err := e.db.QueryRowContext(context.Background(), e.q(query), args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// pending counts PENDING records.
func (e *env) pending(t *testing.T) int {
	return e.count(t, `SELECT count(*) FROM seqby_outbox WHERE status = 'PENDING'`)
}

// relay runs an in-process relay until the test ends.
func (e *env) relay(t *testing.T, pub outbox.Publisher, opts outbox.RelayOptions) *outbox.Relay {
	t.Helper()
	r, _ := e.startRelay(t, pub, opts)
	return r
}

// startRelay runs an in-process relay until the returned stop is called
// or the test ends.
func (e *env) startRelay(t *testing.T, pub outbox.Publisher, opts outbox.RelayOptions) (*outbox.Relay, func()) {
	t.Helper()
	opts.Dialect = e.d
	if opts.PollInterval == 0 {
		opts.PollInterval = 20 * time.Millisecond
	}
	if opts.LeaseTTL == 0 {
		opts.LeaseTTL = 2 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = testLogger(t)
	}
	r := outbox.NewRelay(e.db, pub, opts)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("relay: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return r, stop
}

// eventually polls cond until it holds; the test fails if it does not
// within the duration.
var eventually = poll.Until

// entry is one stream entry decoded.
type entry struct {
	ID, MessageID, Type string
	Seq                 int
}

// stream reads a whole stream.
func (e *env) stream(t *testing.T, name string) []entry {
	t.Helper()
	xs, err := e.rc.XRange(context.Background(), name, "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	var out []entry
	for _, x := range xs {
		var p struct {
			Seq int `json:"seq"`
		}
		payload, _ := x.Values["payload"].(string)
		if err := json.Unmarshal([]byte(payload), &p); err != nil {
			t.Fatalf("stream %s entry %s: payload %q: %v", name, x.ID, payload, err)
		}
		id, _ := x.Values["id"].(string)
		typ, _ := x.Values["type"].(string)
		out = append(out, entry{ID: x.ID, MessageID: id, Type: typ, Seq: p.Seq})
	}
	return out
}

// seqs is the Seq of each entry, in stream order.
func seqs(es []entry) []int {
	out := make([]int, len(es))
	for i, x := range es {
		out[i] = x.Seq
	}
	return out
}

// upTo is [1..n].
func upTo(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i + 1
	}
	return out
}

// testLogger logs through t.Log (not after the test ended).
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(&tWriter{t: t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

type tWriter struct {
	mu   sync.Mutex
	t    *testing.T
	done bool
}

func (w *tWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(strings.TrimSpace(string(p)))
	}
	return len(p), nil
}
