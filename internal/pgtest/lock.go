package pgtest

import (
	"strings"
	"sync"
)

// lockedWriter lets the server's stdout and stderr share one builder.
type lockedWriter struct{ b *strings.Builder }

var outMu sync.Mutex

func (w *lockedWriter) Write(p []byte) (int, error) {
	outMu.Lock()
	defer outMu.Unlock()
	return w.b.Write(p)
}

// Output is what the server has logged so far.
func (s *Server) Output() string {
	outMu.Lock()
	defer outMu.Unlock()
	return s.out.String()
}
