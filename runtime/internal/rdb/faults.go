package rdb

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// FaultReport is one fault an engine instance reports (the runtime's
// Fault, with its error as text).
type FaultReport struct {
	Owner    string    `json:"owner,omitempty"` // set by Faults from the key
	Kind     string    `json:"kind"`            // "released" or "unowned"
	Handler  string    `json:"handler"`
	Category string    `json:"category"`
	Key      string    `json:"key"`
	Stream   string    `json:"stream"`
	Err      string    `json:"error,omitempty"`
	Since    time.Time `json:"since"`
	Until    time.Time `json:"until,omitzero"`
}

// ReportFaults stores owner's faults of each handler in byHandler (one
// JSON list each) in that handler's control hash (ControlKey, the field
// faults:<owner>) for ttl, and deletes its records of the handlers in
// clear (reported before, no faults now). A killed instance's records
// end with their ttl (record.lua).
func ReportFaults(ctx context.Context, c redis.UniversalClient, owner string, byHandler map[string][]FaultReport, clear []string, ttl time.Duration) error {
	for _, h := range slices.Sorted(maps.Keys(byHandler)) {
		raw, err := json.Marshal(byHandler[h])
		if err != nil {
			return err
		}
		if err := scriptRecord.Run(ctx, c, []string{ControlKey(h)}, "faults:"+owner, raw, ttl.Milliseconds()).Err(); err != nil {
			return fmt.Errorf("report the faults of %s in %s: %w", h, ControlKey(h), err)
		}
	}
	for _, h := range clear {
		if err := scriptRecord.Run(ctx, c, []string{ControlKey(h)}, "faults:"+owner, "", ttl.Milliseconds()).Err(); err != nil {
			return fmt.Errorf("clear the faults of %s in %s: %w", h, ControlKey(h), err)
		}
	}
	return nil
}

// Faults reads every engine instance's reported faults, found with SCAN
// of the handlers' control hashes: the records not expired by Redis's
// clock (and an earlier release's reports, in their own keys).
func Faults(ctx context.Context, c redis.UniversalClient) ([]FaultReport, error) {
	keys, err := scanKeys(ctx, c, ControlKey("*"), "hash")
	if err != nil {
		return nil, fmt.Errorf("find fault reports: %w", err)
	}
	now, err := c.Time(ctx).Result()
	if err != nil {
		return nil, fmt.Errorf("read the Redis time: %w", err)
	}
	var out []FaultReport
	for _, k := range keys {
		all, err := c.HGetAll(ctx, k).Result()
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", k, err)
		}
		for f, v := range all {
			owner, ok := strings.CutPrefix(f, "faults:")
			if !ok {
				continue
			}
			exp, raw, _ := strings.Cut(v, " ")
			if ms, err := strconv.ParseInt(exp, 10, 64); err != nil || ms <= now.UnixMilli() {
				continue // expired: its engine stopped reporting
			}
			out = appendReports(out, owner, raw)
		}
	}
	old, err := legacyFaults(ctx, c)
	if err != nil {
		return nil, err
	}
	return append(out, old...), nil
}

// appendReports appends the reports in raw (a JSON list) as owner's.
func appendReports(out []FaultReport, owner, raw string) []FaultReport {
	var fs []FaultReport
	if json.Unmarshal([]byte(raw), &fs) != nil {
		return out // a later format
	}
	for _, f := range fs {
		f.Owner = owner
		out = append(out, f)
	}
	return out
}

// legacyFaults reads the reports of engines of the earlier key layout
// (legacyFaultsKey), which may run other handlers during an upgrade.
func legacyFaults(ctx context.Context, c redis.UniversalClient) ([]FaultReport, error) {
	keys, err := scanKeys(ctx, c, legacyFaultsKey("*"), "")
	if err != nil {
		return nil, fmt.Errorf("find fault reports: %w", err)
	}
	var out []FaultReport
	for _, k := range keys {
		raw, err := c.Get(ctx, k).Result()
		if errors.Is(err, redis.Nil) {
			continue // expired meanwhile
		}
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", k, err)
		}
		out = appendReports(out, strings.TrimPrefix(k, legacyFaultsKey("")), raw)
	}
	return out, nil
}
