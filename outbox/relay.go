package outbox

import (
	"cmp"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/seqby/seqby/runtime"
)

// Publisher publishes a record: *runtime.Publisher is one. PublishRecord
// must fail with runtime.ErrInvalidKey or runtime.ErrInvalidRecord for a
// record that can never be published (the relay abandons it), and with
// anything else for a failure worth retrying.
type Publisher interface {
	PublishRecord(ctx context.Context, r runtime.Record) error
}

var _ Publisher = (*runtime.Publisher)(nil)

// RelayOptions configure a Relay. Every field has a default.
type RelayOptions struct {
	// Dialect is the database's SQL: Postgres or SQLite. Leave it zero
	// with Outbox.NewRelay, which sets the Outbox's; required with the
	// deprecated function NewRelay.
	Dialect Dialect
	// Table is the records table. Leave it "" with Outbox.NewRelay, which
	// sets the Outbox's; with the function NewRelay, default DefaultTable.
	Table string
	// Name names the lease the relays of Table share: one of them is
	// active at a time. Default "default". Relays with different names on
	// one table would publish the same records at once: do not.
	Name string
	// Owner identifies this relay in the lease row and in logs; it must
	// be unique per process. Default host:pid:random.
	Owner string
	// LeaseTTL is how long the lease lasts without renewal: the time a
	// successor waits after a relay dies without releasing it. It is
	// renewed every LeaseTTL/3, and the holder stops publishing
	// LeaseTTL/5 before it expires. Default 15s; at least MinLeaseTTL
	// (Run fails with ErrBadOptions otherwise).
	LeaseTTL time.Duration
	// PollInterval is the longest wait between rounds when the outbox is
	// idle (on PostgreSQL a NOTIFY from Add wakes the relay at once), and
	// between attempts to take the lease; a partition whose publish failed
	// backs off for PollInterval, doubling up to 30s (see Concurrency).
	// Default 1s.
	PollInterval time.Duration
	// BatchSize is how many pending records a round reads, shared fairly
	// among the partitions of the oldest 4×BatchSize (see the package
	// doc). Default 100.
	BatchSize int
	// Concurrency is how many partitions of a round publish at once
	// (each in seq order), and the least retry budget: how many failing
	// partitions whose backoff has ended a round retries at most, doubled
	// after each round whose retries all went through, up to
	// 4×BatchSize (see the package doc). Default 8.
	Concurrency int
	// Retention is how long PUBLISHED records are kept before cleanup
	// deletes them. Default 7 days; negative keeps them forever.
	// ABANDONED records are kept until an operator deletes them.
	Retention time.Duration
	// CleanupInterval is how often the active relay deletes expired
	// published records (in batches of 1000). Default 10m.
	CleanupInterval time.Duration
	// LagWarning: the active relay logs a warning, at most once per
	// LagWarning, while the oldest pending record is older than this (the
	// relay's lag: Redis down, a record failing). Default 1m; negative
	// never warns. seqby.outbox.lag is the same as a metric.
	LagWarning time.Duration
	// Logger receives lease changes, publish failures and abandoned
	// records (Info and Warn), and one Debug line per publish. Default
	// slog.Default().
	Logger *slog.Logger
	// MeterProvider records the relay's metrics (see the package doc).
	// Default: no-op.
	MeterProvider metric.MeterProvider
}

// Relay publishes the outbox's pending records to Redis, each partition in
// seq order, and marks them PUBLISHED (or ABANDONED). Several relays may
// run on one table: one holds the lease and publishes, the others wait to
// take over.
type Relay struct {
	db    *sql.DB
	pub   Publisher
	opts  RelayOptions
	d     Dialect
	table string
	log   *slog.Logger
	wake  chan struct{}
	m     *meters
	// failures counts the partitions whose publish failed this round.
	failures atomic.Int64
	// backoff holds the partitions whose head failed to publish: they are
	// left out of the fetch window until they move on (see round). Only
	// the leading goroutine uses it, between rounds.
	backoff map[group]*partBackoff
	// retryBudget is how many due partitions a round retries at most:
	// Concurrency, doubling after each round whose retries all moved on
	// (an outage over), at most fetchWindow×BatchSize (see round). Only
	// the leading goroutine uses it.
	retryBudget int
	// picks counts the rounds that had more due partitions than their
	// budget (see pickDue).
	picks int
	// err is the Outbox's, or a conflict of opts with it (Outbox.NewRelay):
	// Run and Cleanup return it.
	err error
}

// partBackoff is a failing partition's backoff: fails consecutive failed
// attempts of its head, not retried before until (and after it only when
// a round has room for it).
type partBackoff struct {
	fails int
	until time.Time
}

// maxBackoff bounds a failing partition's wait between attempts.
const maxBackoff = 30 * time.Second

// backoffStep is the wait after a partition's fails-th consecutive
// failure: PollInterval, doubling, at most max(maxBackoff, PollInterval).
func (r *Relay) backoffStep(fails int) time.Duration {
	d := r.opts.PollInterval
	for i := 1; i < fails && d < maxBackoff; i++ {
		d *= 2
	}
	return min(d, max(maxBackoff, r.opts.PollInterval))
}

// NewRelay returns a relay publishing the records of db through pub, in
// opts.Dialect (required) and opts.Table. Run it with Run; bad options
// are reported by Run. On PostgreSQL the relay keeps one of db's
// connections for LISTEN while it runs (with a pool limited to one
// connection, SetMaxOpenConns(1), it polls instead).
//
// Deprecated: use Outbox.NewRelay, which takes the dialect and table from
// the Outbox's Options, given once there.
func NewRelay(db *sql.DB, pub Publisher, opts RelayOptions) *Relay { return newRelay(db, pub, opts) }

// newRelay fills opts' defaults.
func newRelay(db *sql.DB, pub Publisher, opts RelayOptions) *Relay {
	if opts.Table == "" {
		opts.Table = DefaultTable
	}
	if opts.Name == "" {
		opts.Name = "default"
	}
	if opts.Owner == "" {
		opts.Owner = defaultOwner()
	}
	if opts.LeaseTTL <= 0 {
		opts.LeaseTTL = 15 * time.Second
	}
	if opts.PollInterval <= 0 {
		opts.PollInterval = time.Second
	}
	if opts.BatchSize <= 0 {
		opts.BatchSize = 100
	}
	if opts.Concurrency <= 0 {
		opts.Concurrency = 8
	}
	if opts.Retention == 0 {
		opts.Retention = 7 * 24 * time.Hour
	}
	if opts.CleanupInterval <= 0 {
		opts.CleanupInterval = 10 * time.Minute
	}
	if opts.LagWarning == 0 {
		opts.LagWarning = time.Minute
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Relay{db: db, pub: pub, opts: opts, d: opts.Dialect, table: opts.Table,
		log: opts.Logger, wake: make(chan struct{}, 1)}
}

func defaultOwner() string {
	host, _ := os.Hostname()
	b := make([]byte, 4)
	rand.Read(b)
	return host + ":" + strconv.Itoa(os.Getpid()) + ":" + hex.EncodeToString(b)
}

// Run relays until ctx ends, then releases the lease if it holds it and
// returns nil. It returns an error at once for bad options (ErrNoDialect,
// ErrBadTable, ErrBadOptions) or a missing schema (ErrNoSchema: call
// Migrate); database and Redis failures while running are logged and
// retried.
func (r *Relay) Run(ctx context.Context) error {
	if err := r.check(); err != nil {
		return err
	}
	if r.pub == nil {
		return fmt.Errorf("outbox: NewRelay needs a publisher: %w", ErrBadOptions)
	}
	if _, err := r.db.ExecContext(ctx, `SELECT 1 FROM `+r.table+` WHERE 1 = 0`); err != nil {
		return fmt.Errorf("outbox relay %s: %w", r.opts.Name, missing(r.table, err))
	}
	if err := r.ensureLease(ctx); err != nil {
		return err
	}
	m, err := newMeters(r)
	if err != nil {
		return fmt.Errorf("outbox relay %s: metrics: %w", r.opts.Name, err)
	}
	r.m = m
	defer m.close()
	var wg sync.WaitGroup
	defer wg.Wait()
	// LISTEN keeps a connection: not the only one a pool allows.
	if r.d.listen() && r.db.Stats().MaxOpenConnections != 1 {
		lctx, cancel := context.WithCancel(ctx)
		defer cancel()
		wg.Go(func() { r.listen(lctx) })
	}
	for ctx.Err() == nil {
		l, err := r.acquire(ctx)
		if err != nil && ctx.Err() == nil {
			r.log.Warn("outbox: taking the relay lease failed; retrying", "relay", r.opts.Name, "owner", r.opts.Owner, "err", err)
		}
		if l == nil {
			r.sleep(ctx, r.opts.PollInterval)
			continue
		}
		r.log.Info("outbox: relay lease acquired; publishing", "relay", r.opts.Name, "owner", r.opts.Owner, "generation", l.gen)
		r.lead(ctx, l)
	}
	return nil
}

// MinLeaseTTL is the shortest RelayOptions.LeaseTTL: the lease is renewed
// every TTL/3, and the holder must have time to publish before TTL/5.
const MinLeaseTTL = 100 * time.Millisecond

// check reports options that Run and Cleanup cannot use.
func (r *Relay) check() error {
	if r.err != nil {
		return r.err
	}
	if err := r.d.valid(); err != nil {
		return err
	}
	if err := checkTable(r.d, r.table); err != nil {
		return err
	}
	if r.db == nil {
		return fmt.Errorf("outbox: NewRelay needs a database: %w", ErrBadOptions)
	}
	if r.opts.LeaseTTL < MinLeaseTTL {
		return fmt.Errorf("outbox relay %s: LeaseTTL %v is shorter than the minimum, %v: %w", r.opts.Name, r.opts.LeaseTTL, MinLeaseTTL, ErrBadOptions)
	}
	return nil
}

// sleep waits d or until ctx ends.
func (r *Relay) sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// lead publishes while l holds.
func (r *Relay) lead(ctx context.Context, l *lease) {
	lctx, cancel := context.WithCancel(ctx)
	r.backoff = map[group]*partBackoff{}
	r.retryBudget = r.opts.Concurrency
	var wg sync.WaitGroup
	wg.Go(func() { r.renewLoop(lctx, l, cancel) })
	if r.opts.Retention > 0 {
		// On its own goroutine: a long cleanup never holds publishing up.
		wg.Go(func() { r.cleanupLoop(lctx) })
	}
	lastLagCheck := time.Now()
	for lctx.Err() == nil {
		if _, ok := l.valid(); !ok {
			break
		}
		more, err := r.round(lctx, l)
		if errors.Is(err, errLeaseLost) {
			l.lose()
			break
		}
		failed := err != nil
		if err != nil && lctx.Err() == nil {
			r.log.Warn("outbox: relay round failed; retrying", "relay", r.opts.Name, "err", err)
		}
		// The lag is checked every 10 polls (at most every LagWarning).
		if every := min(r.opts.LagWarning, 10*r.opts.PollInterval); r.opts.LagWarning > 0 && time.Since(lastLagCheck) >= every {
			lastLagCheck = time.Now()
			if r.warnLag(lctx) {
				// Warned: not again for LagWarning.
				lastLagCheck = lastLagCheck.Add(r.opts.LagWarning - every)
			}
		}
		// A full batch of which something moved on means more are
		// waiting, even when some partitions failed: they back off and the
		// next round reads past them. So does a retried partition that
		// moved on: the next round retries the next ones whose step ended
		// (after an outage, they recover without waiting PollInterval for
		// every budget of them). A round in which nothing moved on waits.
		if more && !failed {
			continue
		}
		t := time.NewTimer(r.opts.PollInterval)
		select {
		case <-lctx.Done():
		case <-r.wake:
		case <-t.C:
		}
		t.Stop()
	}
	cancel()
	wg.Wait()
	_, ok := l.valid()
	if ctx.Err() != nil && ok {
		rctx, rcancel := context.WithTimeout(context.Background(), 5*time.Second)
		r.release(rctx, l)
		rcancel()
		r.log.Info("outbox: relay lease released", "relay", r.opts.Name, "owner", r.opts.Owner, "generation", l.gen)
		return
	}
	r.log.Warn("outbox: relay lease lost; publishing stopped until it is taken again", "relay", r.opts.Name, "owner", r.opts.Owner, "generation", l.gen)
}

// cleanupLoop deletes expired published records at once and then every
// CleanupInterval, until ctx (the lease) ends.
func (r *Relay) cleanupLoop(ctx context.Context) {
	t := time.NewTicker(r.opts.CleanupInterval)
	defer t.Stop()
	for {
		if _, err := r.cleanup(ctx); err != nil && ctx.Err() == nil {
			r.log.Warn("outbox: deleting old published records failed; retrying at the next cleanup", "relay", r.opts.Name, "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// renewLoop renews l every TTL/3 and cancels the round when it is lost.
func (r *Relay) renewLoop(ctx context.Context, l *lease, cancel context.CancelFunc) {
	t := time.NewTicker(r.opts.LeaseTTL / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		ok, err := r.renew(ctx, l)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			r.log.Warn("outbox: renewing the relay lease failed; retrying", "relay", r.opts.Name, "err", err)
		}
		if _, valid := l.valid(); !ok || !valid {
			l.lose()
			cancel()
			return
		}
	}
}

// pending is a record read back from the table.
type pending struct {
	seq int64
	runtime.Record
}

// group names the pending records of one partition lane (category, key
// and lane) or of one unpartitioned category (its key and lane columns
// ignored: they all go to the category's one stream), published in seq
// order.
type group struct {
	partitioned, backfill bool
	category, key         string
}

// groupOf is the group of p.
func groupOf(p pending) group {
	if !p.Partitioned {
		return group{category: p.Category}
	}
	return group{partitioned: true, backfill: p.Backfill, category: p.Category, key: p.Key}
}

// round publishes one batch of pending records (fetch), and retries the
// head (fetchHeads) of the partitions whose backoff step has ended, at
// most the retry budget of them (see pickDue). It reports whether more
// work is waiting at once: a full batch of which a partition moved on
// (published or abandoned a record), or a retried partition that moved
// on; not a round in which every publish failed.
//
// The retry budget is Concurrency, doubled after every round in which
// each retried partition moved on (an outage is over: after it every
// pending partition has an entry, and they come back 8, 16, 32... per
// round, not 8), up to fetchWindow×BatchSize, and back to Concurrency
// after a round in which a retry did not go through and at each new lease
// term.
//
// A partition whose head failed keeps its backoff entry, and stays out of
// the fetch window, until it moves on (its head published or abandoned)
// or has nothing pending, however long ago its step ended: the window
// is left to the partitions that flow, and failing partitions come back
// only through the few retries of each round, never all at once. Were
// expired ones put back into the window, a backlog of failing partitions
// would fill it again whenever their steps ended faster than a round of
// their failures took (Redis timeouts), and the healthy records behind
// them would wait indefinitely.
func (r *Relay) round(ctx context.Context, l *lease) (bool, error) {
	skip, due := r.pickDue(time.Now())
	recs, err := r.fetch(ctx, skip)
	if err != nil {
		return false, err
	}
	heads, err := r.fetchHeads(ctx, due)
	if err != nil {
		return false, err
	}
	var order []group
	groups := map[group][]pending{}
	add := func(g group, p pending) {
		if _, ok := groups[g]; !ok {
			order = append(order, g)
		}
		groups[g] = append(groups[g], p)
	}
	taken := 0
	for _, p := range recs {
		g := groupOf(p)
		if r.backoff[g] != nil {
			continue // a safety net: the SQL leaves backed-off partitions out
		}
		add(g, p)
		taken++
	}
	retried := map[group]bool{}
	for _, p := range heads {
		g := groupOf(p)
		add(g, p)
		retried[g] = true
	}
	for _, g := range due {
		if !retried[g] {
			// Nothing pending: published by a predecessor, or deleted.
			delete(r.backoff, g)
		}
	}
	if len(order) == 0 {
		return false, nil
	}
	var (
		mu        sync.Mutex
		published []int64
		lost      bool
		failing   []group
		moved     = map[group]bool{}
		wg        sync.WaitGroup
		sem       = make(chan struct{}, r.opts.Concurrency)
	)
	for _, g := range order {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			done, m, f, lostLease := r.publishGroup(ctx, l, groups[g])
			mu.Lock()
			defer mu.Unlock()
			published = append(published, done...)
			lost = lost || lostLease
			if f && ctx.Err() == nil {
				failing = append(failing, g)
			}
			if m {
				moved[g] = true
			}
		})
	}
	wg.Wait()
	// A partition whose head failed waits PollInterval, doubling at each
	// further failure of the same head (at most maxBackoff), while the
	// other partitions go on; one that moved on (published or abandoned
	// its head) starts again.
	// Another round at once only when this one made progress: a full
	// batch of which something moved on (more are waiting behind it), or
	// a retried partition that moved on (the next due ones may too). A
	// round in which nothing moved on, Redis down, waits PollInterval
	// however full its batch was: the next would most likely fail as
	// well, a batch of new partitions at a time.
	more := taken == r.opts.BatchSize && len(moved) > 0
	// The retry budget doubles when every retry went through, and starts
	// over when one did not.
	if len(retried) > 0 {
		allMoved := true
		for g := range retried {
			allMoved = allMoved && moved[g]
		}
		if allMoved {
			r.retryBudget = min(2*max(r.retryBudget, r.opts.Concurrency), max(fetchWindow*r.opts.BatchSize, r.opts.Concurrency))
		} else {
			r.retryBudget = r.opts.Concurrency
		}
	}
	for g := range moved {
		delete(r.backoff, g)
		more = more || retried[g]
	}
	for _, g := range failing {
		b := r.backoff[g]
		if b == nil {
			b = &partBackoff{}
			r.backoff[g] = b
		}
		b.fails++
		step := r.backoffStep(b.fails)
		b.until = time.Now().Add(step)
		r.log.Debug("outbox: partition backs off", "relay", r.opts.Name, "category", g.category, "key", g.key,
			"backfill", g.backfill, "failures", b.fails, "retry_in", step.String())
	}
	if n := r.failures.Swap(0); n > 1 {
		r.log.Warn("outbox: publishes failed this round; those partitions back off", "relay", r.opts.Name, "partitions", n)
	}
	// Mark even when the lease is locally over: the fence refuses the
	// update if it really is gone, and a successor republishes them
	// (stored once, by message id).
	if err := r.markPublished(ctx, l, published); err != nil {
		return more, err
	}
	if lost {
		return more, errLeaseLost
	}
	return more, nil
}

// pickDue returns every partition with a backoff entry (left out of the
// fetch), and those of them to retry this round: every entry whose step
// has ended, or, when more have than the retry budget allows, half the
// budget to those whose step ended longest ago (so that none starves,
// however many fail: a new or renewed entry's step ends after every
// entry already due) and the rest to those with the fewest consecutive
// failures, longest expired first among equals (so that a partition that
// failed once, a blip, is not held behind a backlog of partitions failing
// for good at the 30s step).
func (r *Relay) pickDue(now time.Time) (skip, due []group) {
	skip = make([]group, 0, len(r.backoff))
	for g, b := range r.backoff {
		skip = append(skip, g)
		if !now.Before(b.until) {
			due = append(due, g)
		}
	}
	byUntil := func(a, b group) int {
		return cmp.Or(r.backoff[a].until.Compare(r.backoff[b].until), compareGroups(a, b))
	}
	slices.SortFunc(due, byUntil)
	budget := max(r.retryBudget, r.opts.Concurrency)
	if len(due) <= budget {
		return skip, due
	}
	// An odd budget's odd slot alternates between the two halves (with a
	// budget of 1, one round the longest expired, the next the fewest
	// failures).
	r.picks++
	h := (budget + r.picks%2) / 2
	oldest, rest := due[:h:h], due[h:]
	slices.SortStableFunc(rest, func(a, b group) int {
		return cmp.Compare(r.backoff[a].fails, r.backoff[b].fails)
	})
	return skip, append(oldest, rest[:budget-len(oldest)]...)
}

// compareGroups orders groups by category, key and lane.
func compareGroups(a, b group) int {
	return cmp.Or(strings.Compare(a.category, b.category), strings.Compare(a.key, b.key),
		compareBool(a.partitioned, b.partitioned), compareBool(a.backfill, b.backfill))
}

func compareBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case !a:
		return -1
	}
	return 1
}

// publishGroup publishes one group's records in seq order and returns
// the seqs published, and whether the group moved on (published or
// abandoned a record). It stops at the first transient failure (the
// later records of the partition wait for the next round) and when the
// lease is over; a record that can never be published is abandoned and
// the group goes on.
func (r *Relay) publishGroup(ctx context.Context, l *lease, recs []pending) (published []int64, moved, failed, lost bool) {
	for _, p := range recs {
		if ctx.Err() != nil {
			return published, moved, true, false
		}
		checked, ok := l.valid()
		if !ok {
			return published, moved, false, true
		}
		r.log.Debug("outbox: publishing", "relay", r.opts.Name, "owner", r.opts.Owner, "generation", l.gen,
			"seq", p.seq, "message_id", p.MessageID, "category", p.Category, "key", p.Key,
			"lease_checked_at", checked.Format(time.RFC3339Nano))
		pctx, cancel := context.WithDeadline(ctx, l.deadline())
		err := r.pub.PublishRecord(pctx, p.Record)
		cancel()
		switch {
		case err == nil:
			published = append(published, p.seq)
			moved = true
		case errors.Is(err, runtime.ErrInvalidKey) || errors.Is(err, runtime.ErrInvalidRecord):
			if aerr := r.abandon(ctx, l, p, err); aerr != nil {
				if !errors.Is(aerr, errLeaseLost) && ctx.Err() == nil {
					r.log.Warn("outbox: marking a record abandoned failed; retrying next round", "relay", r.opts.Name, "seq", p.seq, "err", aerr)
					return published, moved, true, false
				}
				return published, moved, false, true
			}
			moved = true
		default:
			if ctx.Err() == nil && r.failures.Add(1) == 1 {
				// One line per round, not per partition: an outage fails
				// them all.
				r.log.Warn("outbox: publish failed; this partition's later records wait, and it is retried after a backoff (PollInterval, doubling up to 30s; a retry budget of partitions per round) while the others go on (further failures of this round are counted, not logged)",
					"relay", r.opts.Name, "seq", p.seq, "message_id", p.MessageID, "category", p.Category, "key", p.Key, "err", err)
			}
			return published, moved, true, false
		}
	}
	return published, moved, false, false
}

// fetchWindow is how many of the oldest pending records (times BatchSize)
// a round chooses its batch from.
const fetchWindow = 4

// cols are the columns a pending record is read from.
const cols = `seq, message_id, category, partition_key, partitioned, backfill, type, payload, trace`

// fetch reads a batch of pending records: from the oldest
// fetchWindow×BatchSize, leaving out every partition in skip, it takes
// the first record of every partition, then the second of each, and so
// on (row_number over the partition, then seq), so that one partition's
// backlog cannot fill the batch; each partition's records are the oldest
// of its pending ones, a prefix, as the order needs. They are returned in
// seq order.
//
// skip, however long, is one parameter (see groupSet). The window still scans the pending
// records of the skipped partitions that come before it (the pending
// index is by seq only).
func (r *Relay) fetch(ctx context.Context, skip []group) ([]pending, error) {
	where := `status = 'PENDING'`
	var args []any
	if len(skip) > 0 {
		in, arg, err := r.groupSet(skip)
		if err != nil {
			return nil, err
		}
		where += ` AND (` + in + `) IS NOT TRUE`
		args = append(args, arg)
	}
	args = append(args, fetchWindow*r.opts.BatchSize, r.opts.BatchSize)
	q := r.d.rebind(`SELECT ` + cols + ` FROM (
  SELECT ` + cols + `, ` + r.rowNumber() + ` AS rn
  FROM (SELECT ` + cols + ` FROM ` + r.table + ` WHERE ` + where + ` ORDER BY seq LIMIT ?) w
) x ORDER BY rn, seq LIMIT ?`)
	return r.readPending(ctx, q, args)
}

// rowNumber numbers each partition's records (as groupOf groups them) in
// seq order.
//
// The partition is exactly groupOf's and groupSet's: its lane flag
// included (an unpartitioned category and its partitioned records of the
// empty key are two groups), and on SQLite, whose TEXT column also holds BLOBs
// and which never finds a TEXT equal to a BLOB, the category and key by
// their bytes (as hex() in groupSet and Go's string): were one group
// split in two, both its parts' first rows would be read, and published
// in one group before the records between them.
func (r *Relay) rowNumber() string {
	if r.d.pg() {
		return `row_number() OVER (PARTITION BY category,
      CASE WHEN partitioned THEN partition_key ELSE '' END, partitioned,
      CASE WHEN partitioned THEN backfill ELSE ` + r.d.falseLit() + ` END ORDER BY seq)`
	}
	return `row_number() OVER (PARTITION BY CAST(category AS BLOB),
      CAST(CASE WHEN partitioned THEN partition_key ELSE '' END AS BLOB), partitioned <> 0,
      CASE WHEN partitioned THEN backfill <> 0 ELSE 0 END ORDER BY seq)`
}

// fetchHeads reads the head, the oldest pending record, of each of gs
// (the partitions to retry), in seq order, in one statement: the pending
// records of gs (matched with IN, as fetch's NOT IN), numbered per
// partition, the first of each. It reads every pending record of those
// partitions (through the pending index, by seq), not only their heads.
// A partition whose head goes through is back in the next round's
// window.
func (r *Relay) fetchHeads(ctx context.Context, gs []group) ([]pending, error) {
	if len(gs) == 0 {
		return nil, nil
	}
	in, arg, err := r.groupSet(gs)
	if err != nil {
		return nil, err
	}
	q := r.d.rebind(`SELECT ` + cols + ` FROM (
  SELECT ` + cols + `, ` + r.rowNumber() + ` AS rn
  FROM ` + r.table + ` WHERE status = 'PENDING' AND ` + in + `
) x WHERE rn = 1`)
	return r.readPending(ctx, q, []any{arg})
}

// groupSet returns in, true for the records of the groups gs as groupOf
// groups them (an unpartitioned category by its category alone, whatever
// its rows' key and lane columns say): (its tuple) IN (a set), the set
// one parameter, arg, however many groups: a JSON array of them (on
// SQLite with the category and key in hex, so that any bytes match). Both
// databases evaluate it against a hash or an index of the set built once
// per statement. fetch excludes with (in) IS NOT TRUE, not NOT IN: the
// same here (neither side is ever NULL), but SQLite, to tell a NOT IN's
// NULL from its false, scans the whole set for every row not in it.
func (r *Relay) groupSet(gs []group) (in string, arg any, err error) {
	type part struct {
		C string `json:"c"`
		K string `json:"k"`
		P bool   `json:"p"`
		B bool   `json:"b"`
	}
	parts := make([]part, len(gs))
	for i, g := range gs {
		// An unpartitioned group's key is '' and its lane false, as the
		// CASEs below make its rows'.
		parts[i] = part{C: g.category, K: g.key, P: g.partitioned, B: g.backfill}
		if !r.d.pg() {
			// SQLite's TEXT holds any bytes, JSON only valid UTF-8
			// (json.Marshal turns the rest into U+FFFD): the strings are
			// compared in hex, as SQLite's hex() spells them.
			parts[i].C = strings.ToUpper(hex.EncodeToString([]byte(g.category)))
			parts[i].K = strings.ToUpper(hex.EncodeToString([]byte(g.key)))
		}
	}
	js, err := json.Marshal(parts)
	if err != nil {
		return "", nil, fmt.Errorf("outbox: read pending records: %w", err)
	}
	if r.d.pg() {
		return `(category, CASE WHEN partitioned THEN partition_key ELSE '' END, partitioned,
      CASE WHEN partitioned THEN backfill ELSE FALSE END)
    IN (SELECT s.c, s.k, s.p, s.b FROM jsonb_to_recordset(?::jsonb) AS s(c text, k text, p boolean, b boolean))`,
			string(js), nil
	}
	return `(hex(category), hex(CASE WHEN partitioned THEN partition_key ELSE '' END), partitioned <> 0,
      CASE WHEN partitioned THEN backfill <> 0 ELSE 0 END)
    IN (SELECT json_extract(value, '$.c'), json_extract(value, '$.k'), json_extract(value, '$.p'),
      json_extract(value, '$.b') FROM json_each(?))`,
		string(js), nil
}

// readPending runs q, which selects cols, and returns its records in seq
// order.
func (r *Relay) readPending(ctx context.Context, q string, args []any) ([]pending, error) {
	rows, err := r.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("outbox: read pending records: %w", missing(r.table, err))
	}
	defer rows.Close()
	var out []pending
	for rows.Next() {
		var p pending
		var trace string
		if err := rows.Scan(&p.seq, &p.MessageID, &p.Category, &p.Key, &p.Partitioned, &p.Backfill, &p.Type, &p.Payload, &trace); err != nil {
			return nil, fmt.Errorf("outbox: read pending records: %w", err)
		}
		if trace != "" {
			// A trace that does not decode is dropped, not fatal: the
			// record still publishes, unlinked.
			if json.Unmarshal([]byte(trace), &p.Trace) != nil {
				p.Trace = nil
			}
		}
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("outbox: read pending records: %w", err)
	}
	slices.SortFunc(out, func(a, b pending) int { return cmp.Compare(a.seq, b.seq) })
	return out, nil
}

// markPublished marks seqs PUBLISHED, fenced by the lease, in statements
// of at most 500. Each partition's seqs are in seq order in seqs (a
// group's are appended together, in the order published), so a failed
// statement leaves a prefix of each partition marked, the earlier
// statements committed: never a record PUBLISHED while an earlier one of
// its partition stays PENDING.
func (r *Relay) markPublished(ctx context.Context, l *lease, seqs []int64) error {
	for len(seqs) > 0 {
		chunk := seqs[:min(len(seqs), 500)]
		seqs = seqs[len(chunk):]
		args := make([]any, 0, len(chunk)+3)
		for _, s := range chunk {
			args = append(args, s)
		}
		args = append(args, r.fenceArgs(l)...)
		q := r.d.rebind(`UPDATE ` + r.table + ` SET status = 'PUBLISHED', published_at = ` + r.d.now() +
			` WHERE status = 'PENDING' AND seq IN (` + strings.TrimSuffix(strings.Repeat("?, ", len(chunk)), ", ") + `)` + r.fence())
		// A cancelled round still marks what it published.
		mctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		res, err := r.db.ExecContext(mctx, q, args...)
		cancel()
		if err != nil {
			return fmt.Errorf("outbox: mark %d records published: %w", len(chunk), err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return fmt.Errorf("outbox: mark %d records published: %w", len(chunk), err)
		}
		if n == 0 {
			return errLeaseLost
		}
		r.m.published(ctx, n)
	}
	return nil
}

// abandon marks p ABANDONED with why as its reason, fenced by the lease.
func (r *Relay) abandon(ctx context.Context, l *lease, p pending, why error) error {
	q := r.d.rebind(`UPDATE ` + r.table + ` SET status = 'ABANDONED', reason = ?, published_at = ` + r.d.now() +
		` WHERE seq = ? AND status = 'PENDING'` + r.fence())
	res, err := r.db.ExecContext(ctx, q, append([]any{why.Error(), p.seq}, r.fenceArgs(l)...)...)
	if err != nil {
		return fmt.Errorf("outbox: mark record %d abandoned: %w", p.seq, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("outbox: mark record %d abandoned: rows affected: %w", p.seq, err)
	}
	if n != 1 {
		return errLeaseLost
	}
	r.m.abandoned(ctx)
	r.log.Warn("outbox: record abandoned: it can never be published; list abandoned records with Outbox.Abandoned",
		"relay", r.opts.Name, "seq", p.seq, "message_id", p.MessageID, "category", p.Category, "key", p.Key, "type", p.Type, "reason", why.Error())
	return nil
}

// warnLag logs a warning when the oldest pending record is older than
// LagWarning, and reports whether it did.
func (r *Relay) warnLag(ctx context.Context) bool {
	st, err := stats(ctx, r.db, r.d, r.table)
	if err != nil || st.OldestPending <= r.opts.LagWarning {
		return false
	}
	r.log.Warn("outbox: the relay is behind: the oldest pending record waits longer than RelayOptions.LagWarning; see the publish failures logged before this",
		"relay", r.opts.Name, "lag", st.OldestPending.Round(time.Millisecond).String(), "pending", st.Pending)
	return true
}
