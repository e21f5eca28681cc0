package rdb

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// LoadState reads a pm instance's state: its data, version (0 with nil
// data when never saved) and, when stream is not "", the last entry of
// stream the state includes ("" when none).
func LoadState(ctx context.Context, c redis.UniversalClient, pm, correlation, stream string) (data []byte, version int64, applied string, err error) {
	key := StateKey(pm, correlation)
	fields := []string{"version", "data"}
	if stream != "" {
		fields = append(fields, AppliedField(stream))
	}
	vals, err := c.HMGet(ctx, key, fields...).Result()
	if err != nil {
		return nil, 0, "", fmt.Errorf("load pm state %s: %w", key, err)
	}
	if len(vals) != len(fields) || vals[0] == nil {
		return nil, 0, "", nil
	}
	vs, _ := vals[0].(string)
	v, err := strconv.ParseInt(vs, 10, 64)
	if err != nil {
		return nil, 0, "", fmt.Errorf("load pm state %s: bad version %q: %w", key, vs, err)
	}
	s, _ := vals[1].(string)
	if len(vals) == 3 {
		applied, _ = vals[2].(string)
	}
	return []byte(s), v, applied, nil
}

// StateSave is one save of a pm instance's state.
type StateSave struct {
	PM, Correlation string
	Data            []byte
	ExpectVersion   int64 // the version loaded (0: nothing stored)
	// LeaseKey and Token fence the save: when LeaseKey is set, the save
	// fails with ErrFenced unless the lease holds Token.
	LeaseKey, Token string
	// Stream and EntryID, when Stream is set, record the entry the state
	// now includes, in the same step.
	Stream, EntryID string
}

// SaveState stores s.Data as the next version if the stored version is
// still s.ExpectVersion. It reports whether it saved, and the stored
// version when it did not.
func SaveState(ctx context.Context, c redis.UniversalClient, s StateSave) (saved bool, stored int64, err error) {
	key := StateKey(s.PM, s.Correlation)
	keys := []string{key}
	if s.LeaseKey != "" {
		keys = append(keys, s.LeaseKey)
	}
	field := ""
	if s.Stream != "" {
		field = AppliedField(s.Stream)
	}
	// The nonce tells this save's second run (a resend) from a conflict.
	var nonce [12]byte
	rand.Read(nonce[:])
	res, err := scriptSaveState.Run(ctx, c, keys, s.ExpectVersion, s.Data, s.Token, field, s.EntryID, hex.EncodeToString(nonce[:])).Slice()
	if err != nil {
		if isFenceErr(err) {
			return false, 0, fmt.Errorf("save pm state %s: %w", key, ErrFenced)
		}
		return false, 0, fmt.Errorf("save pm state %s: %w", key, err)
	}
	if len(res) != 2 {
		return false, 0, fmt.Errorf("save pm state %s: unexpected reply %v", key, res)
	}
	ok, _ := res[0].(int64)
	stored, _ = res[1].(int64)
	return ok == 1, stored, nil
}
