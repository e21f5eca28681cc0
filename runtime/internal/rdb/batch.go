package rdb

import (
	"context"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Batcher sends the fenced reads and acks of many partitions in shared
// round trips, as a Kafka fetch serves many partitions in one request.
// Each call is still its own script checking its own lease, so a
// partition's promise does not change: its worker waits for the reply of
// its ack before it runs the next entry. What changes is that the calls of
// every worker waiting at the same moment travel in one pipeline (go-redis
// splits a pipeline by node on a cluster), which saves Redis the cost of a
// round trip per call.
//
// No goroutine lives longer than the calls: a call that finds fewer than
// maxFlushers pipelines in flight starts one more flusher, which sends the
// queue, and what queued meanwhile, and ends when the queue is empty. So
// calls never wait for a timer, the Batcher needs no start or stop, and
// a caller whose context ends stops waiting at once.
type Batcher struct {
	c redis.UniversalClient

	mu       sync.Mutex
	queue    []*batchCall
	flushers int
}

// NewBatcher returns a Batcher sending on c.
func NewBatcher(c redis.UniversalClient) *Batcher { return &Batcher{c: c} }

// maxFlushers bounds the pipelines one Batcher has in flight: more than
// one keeps the server busy while a reply travels back; a few are enough,
// since every call waiting meanwhile joins the next pipeline.
const maxFlushers = 4

// maxBatch bounds the calls in one pipeline, so a reply is parsed and a
// worker released before the whole queue of a large instance is through.
const maxBatch = 512

// batchTimeout bounds one pipeline, whatever the client's own timeouts:
// a caller whose context ends first stops waiting, but the pipeline is
// sent on a goroutine that must end too.
const batchTimeout = 30 * time.Second

type batchCall struct {
	s    *redis.Script
	keys []string
	args []any
	cmd  *redis.Cmd
	done chan struct{}
}

// run is Script.Run through the shared pipelines.
func (b *Batcher) run(ctx context.Context, s *redis.Script, keys []string, args ...any) *redis.Cmd {
	cl := &batchCall{s: s, keys: keys, args: args, done: make(chan struct{})}
	b.mu.Lock()
	b.queue = append(b.queue, cl)
	lead := b.flushers < maxFlushers
	if lead {
		b.flushers++
	}
	b.mu.Unlock()
	if lead {
		go b.flush()
	}
	select {
	case <-cl.done:
		return cl.cmd
	case <-ctx.Done():
		// The call may still run (as a call whose reply was lost may):
		// the callers' protocol already copes with that.
		cmd := redis.NewCmd(ctx)
		cmd.SetErr(ctx.Err())
		return cmd
	}
}

// flush sends queued calls until the queue is empty.
func (b *Batcher) flush() {
	for {
		b.mu.Lock()
		n := min(len(b.queue), maxBatch)
		if n == 0 {
			b.flushers--
			b.mu.Unlock()
			return
		}
		batch := b.queue[:n:n]
		b.queue = b.queue[n:]
		if len(b.queue) == 0 {
			b.queue = nil // let the backing array go
		}
		b.mu.Unlock()
		b.send(batch)
	}
}

func (b *Batcher) send(batch []*batchCall) {
	ctx, cancel := context.WithTimeout(context.Background(), batchTimeout)
	defer cancel()
	pipe := b.c.Pipeline()
	for _, cl := range batch {
		cl.cmd = cl.s.EvalSha(ctx, pipe, cl.keys, cl.args...)
	}
	_, _ = pipe.Exec(ctx) // each call's error is on its own command
	for _, cl := range batch {
		// A pipeline has no EVAL fallback: a script cache the server lost
		// (a restart, SCRIPT FLUSH) costs these calls one direct round
		// trip, which loads the script again.
		if IsNoScript(cl.cmd.Err()) {
			cl.cmd = cl.s.Run(ctx, b.c, cl.keys, cl.args...)
		}
		close(cl.done)
	}
}
