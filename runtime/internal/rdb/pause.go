package rdb

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// PauseNote is what a pause (the field MetaPaused of a partition's control
// hash, MetaKey, or of a handler's, ControlKey) holds, as JSON.
type PauseNote struct {
	By        string    `json:"by"`                  // the operator, as given
	At        time.Time `json:"at"`                  // when it was paused
	Partition string    `json:"partition,omitempty"` // the partition as the operator named it ("" for a handler)
}

// SetPause stores note in the control hash mark (a partition lease's
// MetaKey or a ControlKey) unless a pause is there already, and lists
// a partition's hash in its handler's MarksKey set (listed first, so a
// listing never misses a stored pause). It returns the note in force:
// note when it was stored (set true), the earlier one otherwise.
func SetPause(ctx context.Context, c redis.UniversalClient, group, mark string, note PauseNote, partition bool) (PauseNote, bool, error) {
	raw, err := json.Marshal(note)
	if err != nil {
		return PauseNote{}, false, err
	}
	list := func() error {
		if !partition {
			return nil
		}
		if err := c.SAdd(ctx, MarksKey(group), mark).Err(); err != nil {
			return fmt.Errorf("list the pause of %s: %w", mark, err)
		}
		return nil
	}
	for range 3 {
		if err := list(); err != nil {
			return PauseNote{}, false, err
		}
		set, err := c.HSetNX(ctx, mark, MetaPaused, raw).Result()
		if err != nil {
			return PauseNote{}, false, fmt.Errorf("store the pause %s: %w", mark, err)
		}
		if set {
			// Listed again after the store: a Resume's SREM racing the
			// first listing cannot leave a stored mark unlisted.
			return note, true, list()
		}
		old, err := c.HGet(ctx, mark, MetaPaused).Result()
		if errors.Is(err, redis.Nil) {
			continue // resumed between the two calls: try again
		}
		if err != nil {
			return PauseNote{}, false, fmt.Errorf("read the pause %s: %w", mark, err)
		}
		if old == string(raw) {
			// Our own note: this HSETNX ran before and its reply was
			// lost, so go-redis (or a proxy) sent it again. The note
			// holds the operator and the time in nanoseconds, which no
			// other pause shares: this call stored it.
			return note, true, list()
		}
		return decodePause(old), false, nil
	}
	return PauseNote{}, false, fmt.Errorf("store the pause %s: it kept being resumed meanwhile; try again", mark)
}

// GetPause reads the pause note at mark; ok false when there is none.
func GetPause(ctx context.Context, c redis.UniversalClient, mark string) (PauseNote, bool, error) {
	raw, err := c.HGet(ctx, mark, MetaPaused).Result()
	if errors.Is(err, redis.Nil) {
		return PauseNote{}, false, nil
	}
	if err != nil {
		return PauseNote{}, false, fmt.Errorf("read the pause %s: %w", mark, err)
	}
	return decodePause(raw), true, nil
}

// decodePause reads a pause mark's value.
func decodePause(raw string) PauseNote {
	var n PauseNote
	if err := json.Unmarshal([]byte(raw), &n); err != nil {
		// A mark seqby did not write still pauses: report it as found.
		return PauseNote{By: "?", Partition: ""}
	}
	return n
}

var scriptClearPause = script("clear_pause")

// ClearPause deletes the pause at mark and its listing, and returns the
// note it held (ok false: there was none). A partition's owners learn of
// it from the wake-up WakePartition sends next.
//
// It is one script (clear_pause.lua) with an op of its own, which leaves
// the note it ended in the field MetaResumed for OpTTL: a resume that
// Redis ran twice (its reply lost, then resent) answers the second time
// with the pause it ended, not "not paused".
func ClearPause(ctx context.Context, c redis.UniversalClient, group, mark string, partition bool) (PauseNote, bool, error) {
	raw, err := scriptClearPause.Run(ctx, c, []string{mark}, NewOp(), OpTTL.Milliseconds()).Text()
	if err != nil && !errors.Is(err, redis.Nil) {
		return PauseNote{}, false, fmt.Errorf("delete the pause %s: %w", mark, err)
	}
	if partition {
		if err := unmark(ctx, c, group, mark); err != nil {
			return PauseNote{}, false, err
		}
	}
	if errors.Is(err, redis.Nil) {
		return PauseNote{}, false, nil
	}
	return decodePause(raw), true, nil
}

// PausedMarks lists the paused partitions of group (their control hashes)
// with their notes; with tidy, it removes from the listing the hashes
// with neither a pause nor a halt (a read-only viewer leaves them).
func PausedMarks(ctx context.Context, c redis.UniversalClient, group string, tidy bool) (map[string]PauseNote, error) {
	marks, err := c.SMembers(ctx, MarksKey(group)).Result()
	if err != nil {
		return nil, fmt.Errorf("list the pauses of %s: %w", group, err)
	}
	out := map[string]PauseNote{}
	for _, m := range marks {
		n, ok, err := GetPause(ctx, c, m)
		if err != nil {
			return nil, err
		}
		if !ok {
			if tidy {
				unmark(ctx, c, group, m) // stale unless halted
			}
			continue
		}
		out[m] = n
	}
	return out, nil
}

// PausedHandlers are the groups with a listed partition pause or a
// handler pause.
func PausedHandlers(ctx context.Context, c redis.UniversalClient) ([]string, error) {
	seen := map[string]bool{}
	var out []string
	for _, prefix := range []string{MarksKey(""), ControlKey("")} {
		keys, err := scanKeys(ctx, c, prefix+"*", "")
		if err != nil {
			return nil, fmt.Errorf("find paused handlers: %w", err)
		}
		for _, k := range keys {
			if g := k[len(prefix):]; !seen[g] {
				seen[g] = true
				out = append(out, g)
			}
		}
	}
	return out, nil
}

// WakePartition wakes the owner of category's partition key: a signal on the
// category's stream, which every engine reads (capped at about maxLen).
func WakePartition(ctx context.Context, c redis.UniversalClient, category, key string, maxLen int64) error {
	t := target{category: category, key: key, everyone: true}
	if err := t.toAll(ctx, c, maxLen).Err(); err != nil {
		return fmt.Errorf("signal %s of %s: %w", key, category, err)
	}
	return nil
}
