package discovery

import (
	"github.com/seqby/seqby/internal/redistest"
)

// newRedis starts a private redis-server for the test and returns a client.
var newRedis = redistest.NewClient

// ctxT is a context for a test's Redis calls.
var ctxT = redistest.Context
