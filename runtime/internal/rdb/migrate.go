package rdb

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

var scriptMigrateField = script("migrate_field")

// MigrateLayout moves what the earlier key layout (layout 1)
// kept of groups into this layout's keys: the halt records and pause
// marks its indexes list (seqby:__halted__:group, seqby:__paused__:group)
// into the fields halt and paused of their control hashes, listed in
// MarksKey, and a handler's pause into its ControlKey. Run calls it
// once it knows no engine of the earlier layout runs the groups
// (ErrUpgrade). It is idempotent and safe beside another engine running
// it: each record moves in one script that keeps a field already there,
// its new hash is listed before it moves and its old listing removed
// after. A pm's state keeps its key ({value}:__pmstate__:pm) and needs no
// move; a generation counter is taken over by the lease's first acquire
// (LeaseRef.Legacy, acquire.lua); attempt marks, resolved and resumed notes end with
// their TTLs; a reaped partition's old keys go with it (reap.lua). It
// returns the listed keys it left where they are: names the earlier
// release would not write (see migrateIndex), for the caller to report.
func MigrateLayout(ctx context.Context, c redis.UniversalClient, groups []string) (left []string, err error) {
	for _, g := range groups {
		l, err := migrateIndex(ctx, c, g, legacyHaltedKey(g), MetaHalt, func(key string) (string, bool) {
			if stream, ok := strings.CutSuffix(key, ":__halt__:"+g); ok {
				return MetaKey(LeaseKey(stream, g)), true
			}
			if rest, ok := strings.CutPrefix(key, "{"); ok {
				if value, ok := strings.CutSuffix(rest, "}:__pmhalt__:"+g); ok {
					return MetaKey(PMLeaseKey(g, value)), true
				}
			}
			return "", false
		})
		if err != nil {
			return left, err
		}
		left = append(left, l...)
		l, err = migrateIndex(ctx, c, g, legacyPausedKey(g), MetaPaused, func(key string) (string, bool) {
			lease, ok := strings.CutSuffix(key, ":__paused__")
			if !ok {
				return "", false
			}
			return MetaKey(lease), true
		})
		if err != nil {
			return left, err
		}
		left = append(left, l...)
		if err := migrateHandlerPause(ctx, c, g); err != nil {
			return left, err
		}
	}
	return left, nil
}

// migrateIndex moves the records listed in the earlier layout's index of
// group into field of their control hashes (meta names it).
func migrateIndex(ctx context.Context, c redis.UniversalClient, group, index, field string, meta func(string) (string, bool)) (left []string, err error) {
	keys, err := c.SMembers(ctx, index).Result()
	if err != nil {
		return nil, fmt.Errorf("migrate the key layout: list %s: %w", index, err)
	}
	for _, key := range keys {
		m, ok := meta(key)
		if !ok || slot(m) != slot(key) {
			// Not a key the earlier release wrote: a name it would not
			// build, or one whose control hash is in another slot (its
			// keys share their control hash's tag; moving it would be a
			// cross-slot call on a cluster). A record there stays,
			// listed, and is reported (left) for the operator to look
			// at; a stale member is unlisted.
			n, err := c.Exists(ctx, key).Result()
			if err != nil {
				return left, fmt.Errorf("migrate the key layout: read %s: %w", key, err)
			}
			if n == 1 {
				left = append(left, key)
				continue
			}
			ok = false
		}
		if ok {
			if err := c.SAdd(ctx, MarksKey(group), m).Err(); err != nil {
				return left, fmt.Errorf("migrate the key layout: list %s: %w", m, err)
			}
			moved, err := scriptMigrateField.Run(ctx, c, []string{key, m}, field).Int64()
			if err != nil {
				return left, fmt.Errorf("migrate the key layout: move %s into %s: %w", key, m, err)
			}
			if moved == 0 {
				// A stale member: listed only if its hash holds something.
				if err := unmark(ctx, c, group, m); err != nil {
					return left, err
				}
			}
		}
		if err := c.SRem(ctx, index, key).Err(); err != nil {
			return left, fmt.Errorf("migrate the key layout: unlist %s: %w", key, err)
		}
	}
	return left, nil
}

// migrateHandlerPause moves group's handler pause of the earlier layout
// (a string of its own slot) into the field paused of ControlKey:
// stored first (HSETNX keeps a pause of this layout), then the old one
// deleted if unchanged.
func migrateHandlerPause(ctx context.Context, c redis.UniversalClient, group string) error {
	old := legacyControlKey(group)
	v, err := c.Get(ctx, old).Result()
	if errors.Is(err, redis.Nil) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("migrate the key layout: read %s: %w", old, err)
	}
	if err := c.HSetNX(ctx, ControlKey(group), MetaPaused, v).Err(); err != nil {
		return fmt.Errorf("migrate the key layout: move %s: %w", old, err)
	}
	if err := scriptMigrateField.Run(ctx, c, []string{old}, MetaPaused, v).Err(); err != nil {
		return fmt.Errorf("migrate the key layout: delete %s: %w", old, err)
	}
	return nil
}
