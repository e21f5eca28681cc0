// Package publish is the write path of runtime's Publisher: a message
// becomes a record (category, key, type name, message id, payload, trace
// context), the record is checked, encoded as a stream entry's fields and
// written by one of rdb's scripts. The public API stays in runtime, which
// keeps Publisher, Record, the options and the key rules, and hands this
// package its configuration, the key rules included, as a Config.
//
// The interfaces here (Message, Partitioned, Unpartitioned, Encoder) have
// the method sets of runtime's, so runtime's values are ours without a
// conversion, and this package does not import runtime.
package publish

import "errors"

// ErrPublish matches failures to publish other than a bad key or a bad
// message; runtime re-exports it.
var ErrPublish = errors.New("publish failed")

// ErrInvalidMessageID matches a caller's message id that breaks the text
// rules of keys; runtime re-exports it.
var ErrInvalidMessageID = errors.New("invalid message id")

// ErrInvalidRecord matches a Record that can never be published for a
// reason other than its key; runtime re-exports it.
var ErrInvalidRecord = errors.New("invalid record")
