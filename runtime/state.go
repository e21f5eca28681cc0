package runtime

import (
	"context"
	"fmt"
	"sync"

	"github.com/redis/go-redis/v9"
	"github.com/seqby/seqby/runtime/internal/executor"
	"github.com/seqby/seqby/runtime/internal/rdb"
)

// StateStore keeps process manager state, one value per (pm, correlation
// value), with a version number for optimistic concurrency. The engine
// loads the state before a pm's handle method and saves it after, through
// the store in Options.StateStore (a Redis store by default).
type StateStore interface {
	// Load returns the stored state and its version. A pm instance never
	// saved returns nil data and version 0, and no error.
	Load(ctx context.Context, pm, correlation string) (data []byte, version int64, err error)
	// Save stores data as version expectVersion+1 if the stored version is
	// still expectVersion (0: nothing stored yet), else it fails with an
	// error matching ErrStateConflict and stores nothing.
	Save(ctx context.Context, pm, correlation string, data []byte, expectVersion int64) error
}

// RedisStateStore keeps pm state in Redis: one hash per (pm, correlation
// value) at "{<value>}:__pmstate__:<pm>", fields "version" and "data" (the JSON state).
//
// A Save made under a pm lease (LeaseFromContext names the same pm and
// correlation value, as the engine's handle context does) is also fenced:
// it fails with ErrFenced unless the lease still holds that token, so a
// stale owner that lost its lease mid-handler cannot overwrite the state
// its successor works on.
type RedisStateStore struct {
	c redis.UniversalClient
}

var _ StateStore = (*RedisStateStore)(nil)

// NewRedisStateStore returns a StateStore on c. The engine uses one on its
// own client by default; build one to read a pm's state from elsewhere
// (an admin page) or to keep state on another Redis (Options.StateStore).
func NewRedisStateStore(c redis.UniversalClient) *RedisStateStore {
	return &RedisStateStore{c: c}
}

// Load reads the state of pm's instance for correlation.
func (s *RedisStateStore) Load(ctx context.Context, pm, correlation string) ([]byte, int64, error) {
	data, v, _, err := rdb.LoadState(ctx, s.c, pm, correlation, "")
	return data, v, err
}

// loadApplied is Load plus the last entry of stream the state includes.
func (s *RedisStateStore) loadApplied(ctx context.Context, pm, correlation, stream string) ([]byte, int64, string, error) {
	return rdb.LoadState(ctx, s.c, pm, correlation, stream)
}

// Save stores data as the next version of pm's instance for correlation
// if expectVersion is still current (ErrStateConflict otherwise), and, when
// ctx carries the instance's lease, only while that lease holds
// (ErrFenced otherwise).
func (s *RedisStateStore) Save(ctx context.Context, pm, correlation string, data []byte, expectVersion int64) error {
	save := rdb.StateSave{PM: pm, Correlation: correlation, Data: data, ExpectVersion: expectVersion}
	if li, ok := LeaseFromContext(ctx); ok && li.Handler == pm && li.Key == correlation && li.LeaseKey != "" {
		save.LeaseKey, save.Token = li.LeaseKey, li.Token
	}
	if stream, id, ok := executor.AppliedFrom(ctx); ok {
		save.Stream, save.EntryID = stream, id
	}
	saved, stored, err := rdb.SaveState(ctx, s.c, save)
	if err != nil {
		return err
	}
	if !saved {
		return fmt.Errorf("save pm state %s at version %d (stored: %d): %w", rdb.StateKey(pm, correlation), expectVersion, stored, ErrStateConflict)
	}
	return nil
}

// MemoryStateStore is a StateStore in process memory, for the inline
// broker and unit tests. It has the same version check as the Redis store.
type MemoryStateStore struct {
	mu sync.Mutex
	m  map[string]memState
}

type memState struct {
	data    []byte
	version int64
	applied map[string]string // stream -> last entry id included
}

var _ StateStore = (*MemoryStateStore)(nil)

// NewMemoryStateStore returns an empty in-memory StateStore.
func NewMemoryStateStore() *MemoryStateStore { return &MemoryStateStore{m: map[string]memState{}} }

// Load returns a copy of the stored state.
func (s *MemoryStateStore) Load(_ context.Context, pm, correlation string) ([]byte, int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.m[pm+"\x00"+correlation]
	if !ok {
		return nil, 0, nil
	}
	return append([]byte(nil), st.data...), st.version, nil
}

// Save stores a copy of data if expectVersion is current.
func (s *MemoryStateStore) Save(ctx context.Context, pm, correlation string, data []byte, expectVersion int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := pm + "\x00" + correlation
	old := s.m[id]
	if old.version != expectVersion {
		return fmt.Errorf("save pm state %s/%s at version %d (stored: %d): %w", pm, correlation, expectVersion, old.version, ErrStateConflict)
	}
	applied := map[string]string{}
	for k, v := range old.applied {
		applied[k] = v
	}
	if stream, id, ok := executor.AppliedFrom(ctx); ok {
		applied[stream] = id
	}
	s.m[id] = memState{data: append([]byte(nil), data...), version: expectVersion + 1, applied: applied}
	return nil
}

// loadApplied is Load plus the last entry of stream the state includes.
func (s *MemoryStateStore) loadApplied(ctx context.Context, pm, correlation, stream string) ([]byte, int64, string, error) {
	data, v, err := s.Load(ctx, pm, correlation)
	s.mu.Lock()
	defer s.mu.Unlock()
	return data, v, s.m[pm+"\x00"+correlation].applied[stream], err
}

// A sequential pm's owner applies each stream of a correlation value in
// order, so the state can say which entry of each stream it already
// includes. The engine passes the entry being applied to Save through the
// context, and the built-in stores record it in the same atomic step as
// the state: an entry redelivered after its owner died between save and
// ack is then recognised and acked without being applied twice. A custom
// StateStore that ignores the mark keeps plain at-least-once.

// appliedLoader is implemented by the stores that record applied entries.
type appliedLoader interface {
	loadApplied(ctx context.Context, pm, correlation, stream string) (data []byte, version int64, lastApplied string, err error)
}
