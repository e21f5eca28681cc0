package executor

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/seqby/seqby/runtime/internal/contract"
	"github.com/seqby/seqby/runtime/internal/rdb"
)

// Decode finds the route of en, of category, for the handler added as
// name, and decodes its payload. skip: the entry was deleted while
// pending, published before the handler's group started, or it is
// another handler's message type; ack it and move on. A non-nil Halt: the
// entry cannot be processed (a type this build does not know, or an
// undecodable payload: permanent), or it is not this build's to run: its
// type is not routed here but another live build of the handler routes
// it (Config.OtherBuilds; not permanent).
func (x *Executor) Decode(name, category string, en rdb.Entry) (rt Route, m any, skip bool, h *contract.Halt) {
	return x.decode(x.mustHandler(name), category, en)
}

// decode is Decode for h.
func (x *Executor) decode(h *handler, category string, en rdb.Entry) (rt Route, m any, skip bool, halt *contract.Halt) {
	if en.Fields == nil {
		x.log.Warn("seqby: pending entry was deleted from the stream; acking it", "stream", en.Stream, "entry", en.ID, "handler", h.Name)
		return rt, nil, true, nil
	}
	if x.beforeStart(h.Name, category, en.ID) {
		return rt, nil, true, nil // published before this handler first started
	}
	typ := en.Fields[rdb.FieldType]
	rt, ok := h.route(category, typ)
	if !ok {
		if halt := x.leftForAnotherBuild(h, category, en, typ); halt != nil {
			return rt, nil, false, halt
		}
	}
	if !ok && x.cfg.KnownType(category, typ) {
		return rt, nil, true, nil // another handler's message type
	}
	if !ok {
		halt := x.Halt(h.Name, category, en, "unknown message type",
			fmt.Errorf("%s %s has no route for type %q on %s, and no registration lists it: deploy a build that knows it, or skip it with seqbyctl", h.Kind, h.Name, typ, category))
		halt.Permanent = true
		return rt, nil, false, halt
	}
	m, err := safeDecode(rt, []byte(en.Fields[rdb.FieldPayload]))
	if err != nil {
		halt := x.Halt(h.Name, category, en, "undecodable payload", err)
		halt.Permanent = true
		return rt, nil, false, halt
	}
	return rt, m, false, nil
}

// leftForAnotherBuild is the halt of an entry whose type h does not route
// on category but another live build of it does (nil otherwise): not
// permanent, so a keyed partition retries it every HaltedRetryInterval
// (and goes on by its own routes once no live build routes it), and the
// other build runs it once it takes the partition over.
func (x *Executor) leftForAnotherBuild(h *handler, category string, en rdb.Entry, typ string) *contract.Halt {
	owners := x.cfg.OtherBuilds(h.Name, category, typ)
	if len(owners) == 0 {
		return nil
	}
	sort.Strings(owners)
	return x.Halt(h.Name, category, en, "type routed by another build of this handler (a rolling deploy)",
		fmt.Errorf("%s %s has no route for type %q on %s in this build, but another build of it, live on %s, routes it: the entry waits for that build, which runs it once it owns the partition; finish the deploy or the rollback, and do not skip the entry: %w",
			h.Kind, h.Name, typ, category, strings.Join(owners, ", "), contract.ErrRoutedByAnotherBuild))
}

// safeDecode runs generated Decode, turning a panic into an error.
func safeDecode(rt Route, payload []byte) (m any, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("decode panicked: %v", p)
		}
	}()
	m, err = rt.Decode(payload)
	if err == nil && m == nil {
		err = fmt.Errorf("decode of %s returned no message", rt.Type)
	}
	return m, err
}

// Invoke calls rt's handle method on m (state: a pm's, else nil), turning
// a panic into an error matching contract.ErrHandlerPanic: nothing a
// message contains may crash an instance.
func Invoke(ctx context.Context, rt Route, state any, m any) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: %v", contract.ErrHandlerPanic, p)
		}
	}()
	return rt.Invoke(ctx, state, m)
}

// Correlate runs rt's generated Correlate on m, turning a panic into an
// error.
func Correlate(rt Route, m any) (v string, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("correlate panicked: %v", p)
		}
	}()
	if rt.Correlate == nil {
		return "", fmt.Errorf("route %s/%s has no Correlate; regenerate with seqgen", rt.Category, rt.Type)
	}
	return rt.Correlate(m)
}
