package outbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"
)

// The relays of one table elect one active relay through a lease row in
// <table>_lease, on the database's clock:
//
//   - acquire: a conditional UPDATE takes the row when it is expired (or
//     released) and increments its generation, the fencing token;
//   - renew: extends expires_at only while owner and generation are still
//     ours and the lease has not expired;
//   - fence: every UPDATE that marks records published or abandoned also
//     requires the lease row to hold our owner and generation, unexpired,
//     in the same statement;
//   - local deadline: the holder counts the lease as lost at (start of the
//     last successful renewal + TTL − margin) on its monotonic clock, and
//     publishes nothing after that, even if it was paused (SIGSTOP, GC,
//     a VM freeze) and has not yet seen a renewal fail.

// errLeaseLost stops a round: the lease is gone (or about to be).
var errLeaseLost = errors.New("outbox relay lease lost")

// lease is the state of one holding of the lease.
type lease struct {
	gen    int64
	mu     sync.Mutex
	until  time.Time // local deadline (monotonic)
	lost   bool
	margin time.Duration
	ttl    time.Duration
}

// valid reports whether the lease may still be used to publish, and the
// time it was checked at.
func (l *lease) valid() (time.Time, bool) {
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	return now, !l.lost && now.Before(l.until)
}

// deadline is the local deadline.
func (l *lease) deadline() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.until
}

func (l *lease) renewed(start time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.lost {
		l.until = start.Add(l.ttl - l.margin)
	}
}

func (l *lease) lose() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lost = true
}

// margin is how long before the database's expiry the holder stops.
func margin(ttl time.Duration) time.Duration { return ttl / 5 }

// ensureLease creates the lease row if it is missing (released, gen 0).
func (r *Relay) ensureLease(ctx context.Context) error {
	q := r.d.rebind(`INSERT INTO ` + r.table + `_lease (name, owner, generation, expires_at) VALUES (?, '', 0, 0) ON CONFLICT (name) DO NOTHING`)
	if _, err := r.db.ExecContext(ctx, q, r.opts.Name); err != nil {
		return fmt.Errorf("outbox relay %s: create lease row: %w", r.opts.Name, missing(r.table, err))
	}
	return nil
}

// acquire tries to take the lease; nil, nil when another relay holds it.
func (r *Relay) acquire(ctx context.Context) (*lease, error) {
	start := time.Now()
	ttl := r.opts.LeaseTTL
	q := r.d.rebind(`UPDATE ` + r.table + `_lease SET owner = ?, generation = generation + 1, expires_at = ` + r.d.nowMS() + ` + ?
WHERE name = ? AND (expires_at <= ` + r.d.nowMS() + ` OR owner = '') RETURNING generation`)
	var gen int64
	err := r.db.QueryRowContext(ctx, q, r.opts.Owner, ttl.Milliseconds(), r.opts.Name).Scan(&gen)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("outbox relay %s: acquire lease: %w", r.opts.Name, missing(r.table, err))
	}
	return &lease{gen: gen, until: start.Add(ttl - margin(ttl)), margin: margin(ttl), ttl: ttl}, nil
}

// renew extends the lease; false when it is no longer ours.
func (r *Relay) renew(ctx context.Context, l *lease) (bool, error) {
	start := time.Now()
	q := r.d.rebind(`UPDATE ` + r.table + `_lease SET expires_at = ` + r.d.nowMS() + ` + ?
WHERE name = ? AND owner = ? AND generation = ? AND expires_at > ` + r.d.nowMS())
	res, err := r.db.ExecContext(ctx, q, r.opts.LeaseTTL.Milliseconds(), r.opts.Name, r.opts.Owner, l.gen)
	if err != nil {
		return true, fmt.Errorf("outbox relay %s: renew lease: %w", r.opts.Name, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		// Unknown whether it was renewed: not lost, not extended (the
		// local deadline still stands); the caller logs and retries.
		return true, fmt.Errorf("outbox relay %s: renew lease: rows affected: %w", r.opts.Name, err)
	}
	if n != 1 {
		return false, nil
	}
	l.renewed(start)
	return true, nil
}

// release gives the lease up so a successor need not wait for it to
// expire.
func (r *Relay) release(ctx context.Context, l *lease) {
	q := r.d.rebind(`UPDATE ` + r.table + `_lease SET owner = '', expires_at = 0 WHERE name = ? AND owner = ? AND generation = ?`)
	if _, err := r.db.ExecContext(ctx, q, r.opts.Name, r.opts.Owner, l.gen); err != nil {
		r.log.Warn("outbox: releasing the relay lease failed; a successor takes over when it expires",
			"relay", r.opts.Name, "owner", r.opts.Owner, "err", err)
	}
}

// fence is the condition, appended to an UPDATE of the records table,
// that the lease is still ours and unexpired; its three arguments follow
// the statement's own.
func (r *Relay) fence() string {
	return ` AND EXISTS (SELECT 1 FROM ` + r.table + `_lease WHERE name = ? AND owner = ? AND generation = ? AND expires_at > ` + r.d.nowMS() + `)`
}

func (r *Relay) fenceArgs(l *lease) []any { return []any{r.opts.Name, r.opts.Owner, l.gen} }
