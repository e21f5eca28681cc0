package seqbytest

import (
	"context"
	"log/slog"
	"strings"
	"testing"
)

// testLogger logs the engine's warnings and errors through t.Log, so they
// show with the failing test (and only with -v otherwise).
func testLogger(t testing.TB) *slog.Logger {
	return slog.New(&tHandler{t: t})
}

type tHandler struct {
	t     testing.TB
	attrs []slog.Attr
}

func (h *tHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }

func (h *tHandler) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Level.String() + " " + r.Message)
	add := func(a slog.Attr) bool { b.WriteString(" " + a.String()); return true }
	for _, a := range h.attrs {
		add(a)
	}
	r.Attrs(add)
	h.t.Log(b.String())
	return nil
}

func (h *tHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &tHandler{t: h.t, attrs: append(append([]slog.Attr(nil), h.attrs...), as...)}
}

func (h *tHandler) WithGroup(string) slog.Handler { return h }
