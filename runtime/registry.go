package runtime

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
)

// Registry holds the validated registrations of one broker. Brokers embed
// it; handlers come from many packages, so every Add re-checks the
// one-key-per-category rule across everything added before.
type Registry struct {
	broker string
	caps   Capabilities
	mu     sync.Mutex
	regs   []Registration
	keys   map[string]keyOwner // category -> partition field
	types  map[string]bool     // category \x00 type of every route
}

type keyOwner struct{ field, handler string }

// NewRegistry returns an empty registry for a broker named broker that
// advertises caps.
func NewRegistry(broker string, caps Capabilities) *Registry {
	return &Registry{broker: broker, caps: caps, keys: map[string]keyOwner{}, types: map[string]bool{}}
}

// Add validates regs and adds them all, or none on error. Checks:
// a name, unique names, at least one route, Decode and Invoke on every
// route; a keyed handler needs StreamPartitioning (ErrCapability) and a
// PartitionField and PartitionKey on every route; every partitioned
// category has one PartitionField across all registrations
// (ErrKeyConflict); a pm has NewState and a Correlate and CorrelateField on
// every route, and a sequential pm partitions each category by its
// correlate field there (ErrKeyConflict otherwise). Errors match
// ErrRegistration and the specific error.
func (r *Registry) Add(regs ...Registration) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	names := map[string]bool{}
	for _, reg := range r.regs {
		names[reg.Name] = true
	}
	keys := make(map[string]keyOwner, len(r.keys))
	for k, v := range r.keys {
		keys[k] = v
	}
	for _, reg := range regs {
		if err := r.check(reg, names, keys); err != nil {
			return fmt.Errorf("%w: %w", ErrRegistration, err)
		}
		names[reg.Name] = true
	}
	r.regs = append(r.regs, regs...)
	r.keys = keys
	for _, reg := range regs {
		for _, rt := range reg.Routes {
			r.types[rt.Category+"\x00"+rt.Type] = true
		}
		for cat, types := range reg.Catalog {
			for _, typ := range types {
				r.types[cat+"\x00"+typ] = true
			}
		}
	}
	return nil
}

// KnownType reports whether any registration routes the type on category
// or lists it in its Catalog. A handler skips a known type it does not
// handle (another handler's message), unless another live build of the same
// handler routes it (a rolling deploy), but an entry of a type this build does
// not know at all halts its partition.
func (r *Registry) KnownType(category, typ string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.types[category+"\x00"+typ]
}

func (r *Registry) check(reg Registration, names map[string]bool, keys map[string]keyOwner) error {
	switch {
	case reg.Name == "":
		return errors.New("a registration has no Name; give it the handler's import path and type")
	case strings.Contains(reg.Name, "@"):
		return fmt.Errorf("handler name %q contains '@', which names a lease generation's consumer group (<name>@<generation>); use letters, digits and '.', '_', '-', '/' as seqgen does", reg.Name)
	case names[reg.Name]:
		return fmt.Errorf("handler %s registered twice; register each handler once", reg.Name)
	case len(reg.Routes) == 0:
		return fmt.Errorf("handler %s has no routes; it must handle at least one message type", reg.Name)
	}
	keyed := reg.Sequential && reg.Kind != ProcessManager
	if reg.Key != "" && reg.Kind != ProcessManager {
		keyed = true
	}
	if (keyed || reg.Sequential) && !r.caps.Has(StreamPartitioning) {
		return fmt.Errorf("handler %s is sequential by %q but broker %q does not advertise StreamPartitioning (it has %v); run it on the Redis engine, or the inline broker in unit tests: %w",
			reg.Name, reg.Key, r.broker, r.caps, ErrCapability)
	}
	switch {
	case reg.AckBatch < 0 || reg.AckBatch > maxAckBatch:
		return fmt.Errorf("handler %s has AckBatch %d; use 0 or 1 for the default promise, or 2 to %d for the batched mode", reg.Name, reg.AckBatch, maxAckBatch)
	case reg.AckBatch > 1 && (!keyed || reg.Kind == ProcessManager):
		return fmt.Errorf("%s %s has AckBatch %d, but the batched mode is for keyed handlers (a process manager, and a handler that is not keyed, ack each entry on their own); leave AckBatch 0", reg.Kind, reg.Name, reg.AckBatch)
	}
	if reg.Kind == ProcessManager {
		if err := checkPM(reg); err != nil {
			return err
		}
	}
	for _, rt := range reg.Routes {
		switch {
		case rt.Category == "" || rt.Type == "":
			return fmt.Errorf("handler %s has a route without Category or Type", reg.Name)
		case strings.ContainsAny(rt.Category, "{}"):
			return fmt.Errorf("handler %s route %s/%s: a category may not contain '{' or '}' (it is the Redis Cluster hash tag of its index); seqgen refuses it too", reg.Name, rt.Category, rt.Type)
		case rt.Decode == nil || rt.Invoke == nil:
			return fmt.Errorf("handler %s route %s/%s lacks Decode or Invoke; regenerate with seqgen", reg.Name, rt.Category, rt.Type)
		case keyed && (rt.PartitionField == "" || rt.PartitionKey == nil):
			return fmt.Errorf("handler %s is sequential by %q but its route %s/%s has no partition field; every message it handles must carry the key",
				reg.Name, reg.Key, rt.Category, rt.Type)
		case rt.PartitionField != "" && rt.PartitionKey == nil:
			return fmt.Errorf("handler %s route %s/%s names partition field %q but has no PartitionKey; regenerate with seqgen",
				reg.Name, rt.Category, rt.Type, rt.PartitionField)
		}
		if rt.PartitionField == "" {
			continue
		}
		if prev, ok := keys[rt.Category]; ok && prev.field != rt.PartitionField {
			return fmt.Errorf("category %q is partitioned by %q in %s and by %q in %s; a category has one partition key, so make them agree: %w",
				rt.Category, prev.field, prev.handler, rt.PartitionField, reg.Name, ErrKeyConflict)
		}
		keys[rt.Category] = keyOwner{field: rt.PartitionField, handler: reg.Name}
	}
	return nil
}

// checkPM mirrors seqgen's pm checks: a pm has NewState and a Correlate on
// every route; a sequential pm partitions each category it handles by the
// field its correlate maps there (PartitionField == CorrelateField), so the
// one-key-per-category check then holds every keyed handler on those
// categories to the pm's correlate field.
func checkPM(reg Registration) error {
	if reg.NewState == nil {
		return fmt.Errorf("process manager %s has no NewState; regenerate with seqgen", reg.Name)
	}
	for _, rt := range reg.Routes {
		switch {
		case rt.Correlate == nil || rt.CorrelateField == "":
			return fmt.Errorf("process manager %s route %s/%s has no correlate field; mark the handle method //seqby:correlate=FIELD and regenerate",
				reg.Name, rt.Category, rt.Type)
		case !reg.Sequential:
		case rt.PartitionField == "" || rt.PartitionKey == nil:
			return fmt.Errorf("sequential process manager %s route %s/%s does not partition %q by its correlate field %q; regenerate with seqgen (the message type needs PartitionKey)",
				reg.Name, rt.Category, rt.Type, rt.Category, rt.CorrelateField)
		case rt.PartitionField != rt.CorrelateField:
			return fmt.Errorf("sequential process manager %s correlates %s/%s by %q but partitions %q by %q; they must be the same field: %w",
				reg.Name, rt.Category, rt.Type, rt.CorrelateField, rt.Category, rt.PartitionField, ErrKeyConflict)
		}
	}
	return nil
}

// Registrations returns the accepted registrations in registration order.
func (r *Registry) Registrations() []Registration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Registration(nil), r.regs...)
}

// PartitionedCategories returns each partitioned category and its key field.
func (r *Registry) PartitionedCategories() map[string]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]string, len(r.keys))
	for k, v := range r.keys {
		out[k] = v.field
	}
	return out
}

// categories returns reg's categories in sorted order.
func categories(reg Registration) []string {
	seen := map[string]bool{}
	var out []string
	for _, rt := range reg.Routes {
		if !seen[rt.Category] {
			seen[rt.Category] = true
			out = append(out, rt.Category)
		}
	}
	sort.Strings(out)
	return out
}

// routeFor returns reg's route for a category and wire type.
func routeFor(reg Registration, category, typ string) (Route, bool) {
	for _, rt := range reg.Routes {
		if rt.Category == category && rt.Type == typ {
			return rt, true
		}
	}
	return Route{}, false
}
