package executor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/seqby/seqby/internal/logsink"
	"github.com/seqby/seqby/runtime/internal/contract"
	"github.com/seqby/seqby/runtime/internal/rdb"
)

// event is the message type of the tests' handlers, on category "order".
type event struct {
	Client string `json:"client"`
	Seq    int    `json:"seq"`
}

var errPoison = errors.New("poison")

// route is the "order"/"event" route calling fn, decoding JSON as the
// engine's default codec does.
func route(fn func(ctx context.Context, state any, e *event) error) Route {
	return Route{Category: "order", Type: "event",
		Decode: func(p []byte) (any, error) {
			var e event
			if err := json.Unmarshal(p, &e); err != nil {
				return nil, err
			}
			return &e, nil
		},
		Correlate: func(m any) (string, error) { return m.(*event).Client, nil },
		Invoke:    func(ctx context.Context, state, m any) error { return fn(ctx, state, m.(*event)) },
	}
}

// fast is a Config with short backoffs, no telemetry, and its log in a
// buffer the test reads.
func fast(log *syncBuffer) Config {
	cfg := Config{Owner: "o1", Concurrency: 2,
		Retry: RetryPolicy{MaxRetries: 2, RetryBackoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond, HaltedRetryInterval: time.Second}}
	if log != nil {
		cfg.Log = slog.New(slog.NewTextHandler(log, nil))
	}
	return cfg
}

// entry is an "event" entry of order:{client} with payload e.
func entry(id string, e event) rdb.Entry {
	p, _ := json.Marshal(e)
	return rdb.Entry{Stream: rdb.PartitionStream("order", e.Client), ID: id, Deliveries: 1,
		Fields: map[string]string{rdb.FieldType: "event", rdb.FieldID: "m-" + id, rdb.FieldPayload: string(p)}}
}

// syncBuffer is a log buffer safe for the stuck-attempt reporter's
// goroutine.
type syncBuffer = logsink.Buffer

// memStore is a StateStore that records the entry each save applies, as
// the built-in stores do; conflicts makes that many first saves fail
// with ErrStateConflict.
type memStore struct {
	mu        sync.Mutex
	data      []byte
	version   int64
	applied   map[string]string
	conflicts int
}

func (s *memStore) Load(_ context.Context, _, _ string) ([]byte, int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.data, s.version, nil
}

func (s *memStore) loadApplied(ctx context.Context, pm, corr, stream string) ([]byte, int64, string, error) {
	data, v, err := s.Load(ctx, pm, corr)
	s.mu.Lock()
	defer s.mu.Unlock()
	return data, v, s.applied[stream], err
}

func (s *memStore) Save(ctx context.Context, _, _ string, data []byte, expect int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conflicts > 0 {
		s.conflicts--
		s.version++ // someone else saved
		return fmt.Errorf("save: %w", contract.ErrStateConflict)
	}
	if expect != s.version {
		return fmt.Errorf("save at %d (stored %d): %w", expect, s.version, contract.ErrStateConflict)
	}
	if stream, id, ok := AppliedFrom(ctx); ok {
		if s.applied == nil {
			s.applied = map[string]string{}
		}
		s.applied[stream] = id
	}
	s.data, s.version = data, expect+1
	return nil
}
