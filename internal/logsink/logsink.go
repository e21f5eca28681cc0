// Package logsink holds Buffer, a log sink that tests read while the code
// under test writes to it from many goroutines (a slog handler's writer).
package logsink

import (
	"strings"
	"sync"
)

// Buffer is an io.Writer safe for concurrent use whose contents can be
// read at any time. The zero value is ready to use.
type Buffer struct {
	mu sync.Mutex
	b  strings.Builder
}

// Write appends p.
func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns everything written so far.
func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
