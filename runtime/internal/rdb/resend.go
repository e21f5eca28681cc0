package rdb

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"net"
	"time"
)

// Redis may run a call twice (issue #39): go-redis resends a command or a
// pipeline whose reply it failed to read, although Redis ran it, and
// proxies and cluster redirects replay calls. A compare-and-act call whose
// second run finds its own effect would then answer with a refusal (the
// record changed, the entry is gone, it was paused already). So each of
// the operator's acting calls carries an op nonce, made once per call in
// Go so every resend carries the same one, and stores it with its effect
// in the same slot for OpTTL; a run that would refuse checks it first and
// answers as the first run did when the effect is its own. Two operators
// acting at once have different nonces, and the second is still refused.

// OpTTL is how long an operator call's nonce is kept with its effect:
// longer than any resend (go-redis's retries and backoff, a proxy's
// replay, a caller's own resend after a lost reply), short enough to leave
// nothing behind.
const OpTTL = 10 * time.Minute

// NewOp returns a fresh op nonce: 16 random bytes in hex.
func NewOp() string {
	b := make([]byte, 16)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// LostReply reports an error after which Redis may or may not have run
// the call: the connection failed while its reply was awaited (EOF, a
// reset, a timeout). An error reply of Redis is not one: Redis answered.
// A context's end is not one either: the caller gave up.
func LostReply(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var ne net.Error
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.As(err, &ne)
}

// ResendTries bounds how many times a caller sends one call whose replies
// are lost: as many as go-redis sends a command by default (MaxRetries 3).
// go-redis v9 does not resend a MULTI/EXEC: it returns the error, so a
// transaction that must be sent again is resent by its caller (Resend).
const ResendTries = 4

// Resend runs call, and again while its reply was lost (LostReply), up to
// ResendTries times in all or until ctx ends; it returns call's last
// error. call must be safe to run twice with the same outcome: it carries
// the same nonce (an op, a message id) each time.
func Resend(ctx context.Context, call func() error) error {
	var err error
	for try := 1; ; try++ {
		err = call()
		if try >= ResendTries || !LostReply(err) || ctx.Err() != nil {
			return err
		}
	}
}
