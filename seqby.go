// Package seqby is the root of the seqby module: per-key sequential
// processing for Go event and command handlers on Redis Streams.
//
// A handler declared sequential by a key field (a client, a tenant, an
// account) never processes two events with the same key at once, on any
// number of engine instances, and their effects land in publish order;
// different keys run in parallel. The module's packages:
//
//   - cmd/seqgen, the go generate tool that reads //seqby: markers and
//     writes typed key extractors and registration tables;
//   - runtime, the engine and the publisher your code imports;
//   - runtime/seqbytest, an in-memory broker and an engine for your tests;
//   - runtime/inspect and cmd/seqbyctl, for operators;
//   - outbox, publishing from a service with a SQL database.
//
// This package holds only the module's version.
package seqby

// Version is this module's release, which seqgen -version and
// seqbyctl -version print. Releases follow semantic versioning; each one's
// changes are in CHANGELOG.md.
const Version = "v0.1.0"
