// Package sleep waits for a duration unless a context ends first: the
// backoffs of the engine's loops and of operators' calls, which must give
// up at once when they are stopped.
package sleep

import (
	"context"
	"time"
)

// For waits d; false when ctx ends first.
func For(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
