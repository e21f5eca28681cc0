package maintenance

import (
	"context"
	"time"

	"github.com/seqby/seqby/runtime/internal/rdb"
)

// Retention: a stream keeps only what some consumer group of its category
// has not acked (rdb.Trim), so an idle, fully handled partition ends
// empty and can turn cold. The workers decide when to trim (they count
// their acks); Trim is the call they make. Dead-letter streams are never
// trimmed.

// Trim runs retention on lanes (cats[i] is the category of lanes[i]) and
// reports whether every lane was trimmed. A failure is logged; retention
// lagging behind loses nothing, so the worker tries again at its next
// due trim. handler names the worker that trims, for the log line. The
// calls run on their own deadline, and outlive ctx's cancellation: a
// stopping worker still trims what it acked.
func (m *Maintenance) Trim(ctx context.Context, handler string, cats, lanes []string) bool {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	ok := true
	groups := map[string][]string{} // read once per category and trim
	for i, lane := range lanes {
		gs, read := groups[cats[i]]
		var err error
		if !read {
			if gs, err = rdb.Groups(ctx, m.cfg.Client, cats[i]); err == nil {
				groups[cats[i]] = gs
			}
		}
		if err == nil {
			_, err = rdb.Trim(ctx, m.cfg.Client, gs, lane)
		}
		if err != nil {
			ok = false
			m.cfg.Log.Warn("seqby: trimming acked entries failed; retried at the next trim", "handler", handler, "stream", lane, "err", err)
		}
	}
	return ok
}
