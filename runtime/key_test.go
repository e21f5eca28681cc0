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
		{"o-\xff", "backfill", ErrKeyEncoding},
		{"\xc3", "backfill", ErrKeyEncoding},
		{"a\x00b", "backfill", ErrKeyControl},
		{"a\nb", "backfill", ErrKeyControl},
		{"\x1b[31mred", "backfill", ErrKeyControl},
		{"a\u0085b", "backfill", ErrKeyControl}, // C1 control
		{"a\x7f", "backfill", ErrKeyControl},
		{"Zürich-東京", "backfill", nil},
		{strings.Repeat("k", MaxKeyLength), "backfill", nil},
		{strings.Repeat("k", MaxKeyLength+1), "backfill", ErrKeyLength},
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

// A non-sequential pm's correlation value follows the text rules of keys
// (issue #11, finding 7) but may hold what a stream name forbids.
func TestCorrelationValue(t *testing.T) {
	for _, tt := range []struct {
		value string
		rule  error
	}{
		{"o-1", nil}, {"a:b{c}", nil}, {"", ErrEmptyKey}, {"o-\xff", ErrKeyEncoding},
		{"o\x1b", ErrKeyControl}, {strings.Repeat("o", MaxKeyLength+1), ErrKeyLength},
	} {
		v, err := CorrelationValue("order", "OrderID", tt.value)
		if tt.rule == nil && (err != nil || v != tt.value) || tt.rule != nil && !errors.Is(err, tt.rule) {
			t.Errorf("CorrelationValue(%q) = %q, %v; want rule %v", tt.value, v, err, tt.rule)
		}
	}
}

// The protocol package keeps its own copy of the default (it cannot import
// this package); the two must not drift.
func TestDefaultBackfillSuffixMatchesProtocol(t *testing.T) {
	if DefaultBackfillSuffix != rdb.DefaultBackfillSuffix {
		t.Fatalf("DefaultBackfillSuffix %q, runtime/internal/rdb has %q", DefaultBackfillSuffix, rdb.DefaultBackfillSuffix)
	}
}
