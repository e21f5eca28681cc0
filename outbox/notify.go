package outbox

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5/stdlib"
)

// listen wakes the relay on NOTIFY (PostgreSQL): Add notifies the
// table's channel in the caller's transaction, delivered at commit. A
// dropped connection falls back to polling until it is back.
func (r *Relay) listen(ctx context.Context) {
	for ctx.Err() == nil {
		err := r.listenOnce(ctx)
		if ctx.Err() != nil {
			return
		}
		r.log.Debug("outbox: LISTEN connection ended; polling until it is back", "relay", r.opts.Name, "err", err)
		r.sleep(ctx, r.opts.PollInterval)
	}
}

func (r *Relay) listenOnce(ctx context.Context) error {
	conn, err := r.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	return conn.Raw(func(dc any) error {
		sc, ok := dc.(*stdlib.Conn)
		if !ok {
			return errors.New("outbox: the PostgreSQL dialect needs the pgx driver (github.com/jackc/pgx/v5/stdlib) for LISTEN; polling instead")
		}
		c := sc.Conn()
		// The connection is listening: close it on the way out, so
		// database/sql drops it instead of reusing it.
		defer c.Close(context.WithoutCancel(ctx))
		if _, err := c.Exec(ctx, `LISTEN "`+channel(r.table)+`"`); err != nil {
			return err
		}
		r.poke() // records may have been added before LISTEN
		for {
			if _, err := c.WaitForNotification(ctx); err != nil {
				return err
			}
			r.poke()
		}
	})
}

// poke wakes the relay's loop if it waits.
func (r *Relay) poke() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}
