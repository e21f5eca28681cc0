package publish

import (
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"time"

	"go.opentelemetry.io/otel/propagation"

	"github.com/seqby/seqby/internal/redistest"
)

// newRedis starts a private redis-server for the test and returns a client.
var newRedis = redistest.NewClient

// ctxT is a context for a test's Redis calls.
var ctxT = redistest.Context

// errColon and errEmpty stand for runtime's key rules, which stay there.
var (
	errColon = errors.New("key contains ':'")
	errEmpty = errors.New("key is empty")
)

// keyRule is a stand-in for runtime's key rules: an empty key, one with a
// colon and the backfill suffix are refused.
func keyRule(category, field, value, suffix string) error {
	switch {
	case value == "":
		return errEmpty
	case strings.Contains(value, ":"), value == suffix:
		return errColon
	}
	return nil
}

// idRule is a stand-in for runtime's text rule: an empty id is refused.
func idRule(id string) error {
	if id == "" {
		return errEmpty
	}
	return nil
}

type jsonCodec struct{}

func (jsonCodec) Marshal(v any) ([]byte, error) { return json.Marshal(v) }

// testConfig is runtime's default configuration, with the stand-in rules.
func testConfig() Config {
	return Config{
		Codec: jsonCodec{}, BackfillSuffix: "backfill", SignalMaxLen: 10000,
		Logger: slog.New(slog.DiscardHandler), DedupWindow: 24 * time.Hour, ResendWindow: time.Minute,
		Propagator: propagation.TraceContext{}, ReplicaTimeout: time.Second,
		KeyRule: keyRule, IDRule: idRule,
	}
}

// testEvent is a message of the partitioned category "order".
type testEvent struct {
	Client string `json:"client"`
	Seq    int    `json:"seq"`
}

func (*testEvent) StreamCategory() string          { return "order" }
func (e *testEvent) PartitionKey() (string, error) { return e.Client, nil }

func ev(client string, seq int) *testEvent { return &testEvent{Client: client, Seq: seq} }

// testNote is a message of the unpartitioned category "note".
type testNote struct {
	Text string `json:"text"`
}

func (*testNote) StreamCategory() string { return "note" }
