// Package outbox is seqby's transactional outbox (manual: docs/outbox.md).
package outbox
