package runtime

import (
	"errors"
	"strings"
	"testing"

	"github.com/seqby/seqby/runtime/internal/rdb"
)

func TestCheckKeySuffix(t *testing.T) {
	tests := []struct {
		value, suffix string
		rule          error // nil: accepted
	}{
		{"client-123", "backfill", nil},
		{"550e8400-e29b-41d4-a716-446655440000", "backfill", nil},
		{"", "backfill", ErrEmptyKey},
		{"a:b", "backfill", ErrKeyColon},
		{":", "backfill", ErrKeyColon},
		{"{a}", "backfill", ErrKeyBrace},
		{"a{b", "backfill", ErrKeyBrace},
		{"}", "backfill", ErrKeyBrace},
		{"dlq", "backfill", ErrReservedKey},
		{"backfill", "backfill", ErrReservedKey},
		{"backfill", "late", nil},
		{"late", "late", ErrReservedKey},
		{"__partitions__", "backfill", ErrSentinelKey},
		{"__x__", "backfill", ErrSentinelKey},
		{"____", "backfill", nil}, // too short to hold a name
		{"__x", "backfill", nil},
	}
	for _, tt := range tests {
		err := checkKeySuffix("order", "Client", tt.value, tt.suffix)
		if tt.rule == nil {
			if err != nil {
				t.Errorf("%q (suffix %q): %v, want accepted", tt.value, tt.suffix, err)
			}
			continue
		}
		var ke *KeyError
		if !errors.Is(err, ErrInvalidKey) || !errors.Is(err, tt.rule) || !errors.As(err, &ke) {
			t.Errorf("%q (suffix %q): %v, want %v", tt.value, tt.suffix, err, tt.rule)
			continue
		}
		if ke.Category != "order" || ke.Field != "Client" || !strings.Contains(err.Error(), "Client") {
			t.Errorf("%q: error %q does not name the field", tt.value, err)
		}
	}
	if err := NullKey("order", "Client"); !errors.Is(err, ErrNullKey) || !errors.Is(err, ErrInvalidKey) {
		t.Errorf("NullKey: %v", err)
	}
}

// The protocol package keeps its own copy of the default (it cannot import
// this package); the two must not drift.
func TestDefaultBackfillSuffixMatchesProtocol(t *testing.T) {
	if DefaultBackfillSuffix != rdb.DefaultBackfillSuffix {
		t.Fatalf("DefaultBackfillSuffix %q, runtime/internal/rdb has %q", DefaultBackfillSuffix, rdb.DefaultBackfillSuffix)
	}
}
