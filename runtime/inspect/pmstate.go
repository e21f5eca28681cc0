package inspect

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/seqby/seqby/runtime/internal/rdb"
)

// ErrNoPMState means no state is stored for the pm and correlation value:
// the pm never saved one for that value (no message of it was applied
// yet), the value or the pm's name is not the one the engine used, or its
// engines keep state in another store (Options.StateStore).
var ErrNoPMState = errors.New("no pm state stored")

// PMState is a process manager instance's stored state with its metadata,
// as the engine's Redis state store keeps it: one hash per pm and
// correlation value, {value}:__pmstate__:pm.
//
// The engine stores state as JSON (encoding/json of the pm's state type,
// whatever codec its messages use), so State is that JSON as stored; read
// it into the pm's own type with PMStateOf, or Decode.
type PMState struct {
	PM    string `json:"pm"`    // the pm's registration name
	Value string `json:"value"` // the correlation value
	Key   string `json:"key"`   // the Redis hash holding it
	// Version counts the saves: 1 after the first. Each save checks the
	// version it loaded (optimistic concurrency).
	Version int64 `json:"version"`
	// State is the state's JSON, as the pm's last save wrote it.
	State json.RawMessage `json:"state"`
	// Applied is, for a sequential pm, the last entry of each stream the
	// state includes (stream -> entry id), saved with the state in one
	// step, so an entry redelivered after a crash is not applied twice.
	// Empty for a concurrent pm; never nil.
	Applied map[string]string `json:"applied"`
}

// Decode unmarshals the state's JSON into v, a pointer to the pm's state
// type (what its NewState returns), as the engine does before a handle
// method.
func (s PMState) Decode(v any) error {
	if err := json.Unmarshal(s.State, v); err != nil {
		return fmt.Errorf("decode the state of pm %s for %q (version %d) into %T: %w; is it the pm's state type?", s.PM, s.Value, s.Version, v, err)
	}
	return nil
}

// PMState reads the stored state of pm for the correlation value, with
// its version and applied marks. It reads the Redis state store the
// engines use by default; a pm whose engines set Options.StateStore to
// another store keeps its state there instead. A pm and value with no
// state is an error matching ErrNoPMState (or ErrUnknownHandler when no
// engine registered pm with this Redis, suggesting the nearest name).
func (i *Inspector) PMState(ctx context.Context, pm, value string) (PMState, error) {
	key := rdb.StateKey(pm, value)
	fields, err := i.c.HGetAll(ctx, key).Result()
	if err != nil {
		return PMState{}, fmt.Errorf("read pm state %s: %w", key, err)
	}
	if fields["version"] == "" {
		// None saved: the hash may hold its lease's control fields only
		// (gen, halt, paused...: it is the pm lease's control hash).
		return PMState{}, i.noPMState(ctx, pm, value)
	}
	out := PMState{PM: pm, Value: value, Key: key, Applied: map[string]string{}}
	if out.Version, err = strconv.ParseInt(fields["version"], 10, 64); err != nil {
		return PMState{}, fmt.Errorf("read pm state %s: bad version %q (not written by a seqby engine?): %w", key, fields["version"], err)
	}
	data := []byte(fields["data"])
	if !json.Valid(data) {
		return PMState{}, fmt.Errorf("read pm state %s (version %d): its data is not JSON (not written by a seqby engine?)", key, out.Version)
	}
	out.State = data
	for f, v := range fields {
		// A reaper blanks the marks of the lanes it deletes: no mark.
		if stream, ok := strings.CutPrefix(f, rdb.AppliedField("")); ok && v != "" {
			out.Applied[stream] = v
		}
	}
	return out, nil
}

// PMStateOf reads the stored state of pm for the correlation value (see
// Inspector.PMState) and decodes it into the pm's state type T: the type
// its NewState returns a pointer to.
//
//	st, meta, err := inspect.PMStateOf[billing.FlowState](ctx, in, "example.com/shop/billing.Flow", "o-1")
func PMStateOf[T any](ctx context.Context, in *Inspector, pm, value string) (T, PMState, error) {
	var v T
	s, err := in.PMState(ctx, pm, value)
	if err != nil {
		return v, s, err
	}
	return v, s, s.Decode(&v)
}

// noPMState is the error for a pm and value without state: ErrNoPMState,
// or ErrUnknownHandler when pm is not a registered name, with what to
// check.
func (i *Inspector) noPMState(ctx context.Context, pm, value string) error {
	if _, err := i.Handler(ctx, pm); err != nil {
		return err
	}
	hint := ""
	if _, key, ok := rdb.ParsePartitionStream(value); ok {
		// A partition stream given where its key is meant.
		hint = fmt.Sprintf("; %q is a partition stream: the correlation value is its key, %q", value, key)
	}
	return fmt.Errorf("%w for pm %s and value %q (no %s)%s: the pm has not saved state for that value yet, the value is not one it correlates by, or its engines keep state in another store (Options.StateStore)",
		ErrNoPMState, pm, value, rdb.StateKey(pm, value), hint)
}
