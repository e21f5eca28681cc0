package runtime

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/seqby/seqby/runtime/internal/rdb"
)

// DefaultBackfillSuffix is the name of a partition's backfill lane
// (category:{key}:backfill) unless the engine is configured otherwise.
// Generated PartitionKey methods check keys against this default; the
// publisher checks again against the suffix it is configured with.
const DefaultBackfillSuffix = "backfill"

// The key rules' errors. Each *KeyError matches ErrInvalidKey and exactly
// one of the others.
var (
	// ErrInvalidKey matches every key-rule violation. Branch on it to tell
	// a bad key (the caller's data is wrong; retrying will not help) from a
	// Redis failure.
	ErrInvalidKey = errors.New("invalid partition key")
	// ErrNullKey: the key field is a nil pointer.
	ErrNullKey = errors.New("key is null (nil pointer)")
	// ErrEmptyKey: the key is the empty string.
	ErrEmptyKey = errors.New("key is empty")
	// ErrKeyColon: the key contains ':', which would make the stream name
	// category:{key} ambiguous with its lanes.
	ErrKeyColon = errors.New("key contains ':'")
	// ErrKeyBrace: the key contains '{' or '}'. The key is its partition's
	// Redis Cluster hash tag (category:{key}), which a brace would break.
	ErrKeyBrace = errors.New("key contains '{' or '}'")
	// ErrReservedKey: the key equals a lane token (dlq or the backfill suffix).
	ErrReservedKey = errors.New("key is a reserved lane token")
	// ErrSentinelKey: the key has the __name__ form reserved for seqby's own
	// keys such as {category}:__partitions__.
	ErrSentinelKey = errors.New("key has the reserved __name__ form")
	// ErrKeyEncoding: the key is not valid UTF-8. Payloads are text (JSON
	// replaces invalid bytes), so such a key would not survive the trip
	// through its own message.
	ErrKeyEncoding = errors.New("key is not valid UTF-8")
	// ErrKeyControl: the key contains a control character (U+0000-U+001F,
	// U+007F-U+009F), which would corrupt logs and terminals.
	ErrKeyControl = errors.New("key contains a control character")
	// ErrKeyLength: the key is longer than MaxKeyLength bytes.
	ErrKeyLength = fmt.Errorf("key is longer than %d bytes", MaxKeyLength)
)

// MaxKeyLength is the longest partition key (and correlation value)
// accepted, in bytes: it is part of every key name of its partition.
const MaxKeyLength = 256

// KeyError reports a partition key that breaks one of the key rules.
type KeyError struct {
	Category string // stream category of the message
	Field    string // key field the value was read from
	Value    string // the rejected value ("" for a null key)
	Rule     error  // one of the Err*Key rules above (ErrNullKey, ErrEmptyKey, ErrKeyColon, ...)
	// suffix is the backfill suffix the rules were checked against, so the
	// message names the reserved token that actually applied ("" means
	// DefaultBackfillSuffix).
	suffix string
}

// Error names the category, field, value and rule, and says what to do.
func (e *KeyError) Error() string {
	where := "partition key"
	if e.Category != "" {
		where = fmt.Sprintf("partition key %s of category %q", e.Field, e.Category)
	}
	switch e.Rule {
	case ErrNullKey, ErrEmptyKey:
		return fmt.Sprintf("%s: %v; set the field before publishing", where, e.Rule)
	default:
		suffix := e.suffix
		if suffix == "" {
			suffix = DefaultBackfillSuffix
		}
		return fmt.Sprintf("%s: value %q rejected: %v; keys must be plain entity ids (valid UTF-8 of at most %d bytes, no control characters, no ':', '{' or '}', not %q, %q or __name__)",
			where, e.Value, e.Rule, MaxKeyLength, rdb.DLQSuffix, suffix)
	}
}

// Unwrap lets errors.Is match both ErrInvalidKey and the specific rule.
func (e *KeyError) Unwrap() []error { return []error{ErrInvalidKey, e.Rule} }

// CheckKey applies the key rules with the default backfill suffix.
// It returns nil or a *KeyError; category and field only label the error.
func CheckKey(category, field, value string) error {
	return checkKeySuffix(category, field, value, DefaultBackfillSuffix)
}

// checkKeySuffix applies the key rules with a configured backfill suffix.
func checkKeySuffix(category, field, value, backfillSuffix string) error {
	rule := textRule(value)
	switch {
	case rule != nil:
	case strings.Contains(value, ":"):
		rule = ErrKeyColon
	case strings.ContainsAny(value, "{}"):
		rule = ErrKeyBrace
	case value == rdb.DLQSuffix || value == backfillSuffix:
		rule = ErrReservedKey
	case isSentinel(value):
		rule = ErrSentinelKey
	default:
		return nil
	}
	return &KeyError{Category: category, Field: field, Value: value, Rule: rule, suffix: backfillSuffix}
}

// textRule is the rules every key and correlation value follows: not
// empty, valid UTF-8, no control characters, at most MaxKeyLength bytes.
func textRule(value string) error {
	switch {
	case value == "":
		return ErrEmptyKey
	case len(value) > MaxKeyLength:
		return ErrKeyLength
	case !utf8.ValidString(value):
		return ErrKeyEncoding
	case strings.IndexFunc(value, unicode.IsControl) >= 0:
		return ErrKeyControl
	}
	return nil
}

// NullKey returns the error for a nil key pointer. Generated
// PartitionKey methods call it when the key field is a nil pointer.
func NullKey(category, field string) error {
	return &KeyError{Category: category, Field: field, Rule: ErrNullKey}
}

// isSentinel reports whether s has the reserved form ^__.+__$.
func isSentinel(s string) bool {
	return len(s) > 4 && strings.HasPrefix(s, "__") && strings.HasSuffix(s, "__")
}

// Key applies the key rules to a partition key read from a message and
// returns it. Generated PartitionKey methods end in a call to Key.
func Key(category, field, value string) (string, error) {
	if err := CheckKey(category, field, value); err != nil {
		return "", err
	}
	return value, nil
}

// CorrelationValue checks the correlation value of a pm that is not
// sequential: it must be non-empty valid UTF-8 of at most MaxKeyLength
// bytes without control characters, like a key, but may hold the
// characters a stream name forbids. (A sequential pm's correlation value
// is its partition key and goes through Key.)
func CorrelationValue(category, field, value string) (string, error) {
	if rule := textRule(value); rule != nil {
		return "", &KeyError{Category: category, Field: field, Value: value, Rule: rule}
	}
	return value, nil
}
