package rdb

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// FaultsKey holds an engine instance's current faults (FaultReport, as a
// JSON list) for operators: written by its heartbeats while it has any,
// with a TTL, deleted when it has none.
func FaultsKey(owner string) string { return "seqby:__faults__:" + owner }

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

// ReportFaults stores owner's faults with ttl, or deletes its report when
// there are none.
func ReportFaults(ctx context.Context, c redis.UniversalClient, owner string, fs []FaultReport, ttl time.Duration) error {
	if len(fs) == 0 {
		return c.Del(ctx, FaultsKey(owner)).Err()
	}
	raw, err := json.Marshal(fs)
	if err != nil {
		return err
	}
	return c.Set(ctx, FaultsKey(owner), raw, ttl).Err()
}

// Faults reads every engine instance's reported faults, found with SCAN.
func Faults(ctx context.Context, c redis.UniversalClient) ([]FaultReport, error) {
	keys, err := scanKeys(ctx, c, FaultsKey("*"), "")
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
		var fs []FaultReport
		if json.Unmarshal([]byte(raw), &fs) != nil {
			continue // a later format
		}
		owner := strings.TrimPrefix(k, FaultsKey(""))
		for _, f := range fs {
			f.Owner = owner
			out = append(out, f)
		}
	}
	return out, nil
}
