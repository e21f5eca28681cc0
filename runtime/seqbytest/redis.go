package seqbytest

import (
	"fmt"

	"github.com/alicebob/miniredis/v2"
)

// EmbeddedRedis starts an embedded, in-memory Redis (miniredis, the one
// StartEngine uses) on a free loopback port, for examples and programs
// that have no testing.TB, and returns its URL, for runtime.Connect, and
// a func that stops it. Like httptest.NewServer, it panics if it cannot
// listen.
//
// It has no CONFIG command: an engine on it needs
// runtime.Options.SkipEvictionCheck, or it warns that it could not check
// the maxmemory-policy. It runs handlers' logic; the engine's guarantees
// are tested on real servers (see the package doc). Tests use StartEngine,
// which starts and stops one by itself.
func EmbeddedRedis() (url string, stop func()) {
	m, err := miniredis.Run()
	if err != nil {
		panic(fmt.Sprintf("seqbytest: start an embedded Redis: %v", err))
	}
	return "redis://" + m.Addr(), m.Close
}
