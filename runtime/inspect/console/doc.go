// Package console is seqby's operator console: a web page, built on
// inspect.Inspector, for what seqbyctl shows and does. It is an
// http.Handler that a service mounts in its own mux, like the engine's
// HealthHandler, or that "seqbyctl serve -addr 127.0.0.1:8080" runs on
// its own.
//
//	in := inspect.New(client)
//	con, err := console.New(in, console.Options{})
//	if err != nil { ... }
//	defer con.Close()
//	mux.Handle("/seqby/", http.StripPrefix("/seqby", con))
//
// Pages, all server-rendered (html/template, assets embedded; a few lines
// of plain JavaScript refresh the overview):
//
//   - / (overview): the faults the engines report (inspect.Inspector.Faults),
//     every handler with its categories, its partitions
//     owned, unowned, halted and paused, total lag and backlog, its
//     instances with their last heartbeat, live or silent, and a chart of
//     its backlog and lag over the console's sampling window
//     (Options.SampleInterval, SampleWindow);
//   - /handler?name=H: its partitions, 100 a page, by key or sorted by
//     lag, backlog or age of head, searchable by key, with the
//     distribution of lag across them;
//   - /partition?handler=H&stream=S: lease (owner, generation, expiry),
//     halt record, head entry with its fields and deliveries, pending
//     entries, the last entries, its dead-letter entries, and whether it
//     is paused;
//   - /halted: halted partitions of every handler (skip, dlq move, pause,
//     resume), and the dead-letter entries (replay, drop);
//   - /paused: the pauses;
//   - /audit: the audit stream, newest first.
//
// # Cost
//
// The view of a handler by key reads the handler's partition index and
// describes only the page (inspect.Inspector.PartitionPage), live. The
// views that need every partition (the overview, the sorted views, the
// lag distribution, the charts) share one read of each handler
// (inspect.Inspector.Partitions): the sampler renews it each round, and
// a view renews it when it is older than Options.SampleInterval or an
// action changed it, if the read took under a second; a longer read
// (many partitions) only the sampler renews, whose rounds then start ten
// times a round's duration apart. The known handlers and the engines'
// faults are read once per SampleInterval too. The console holds the
// latest read of each handler.
//
// # Actions
//
// The console is read-only unless Options.Write is set, which needs
// Options.Token: a mutating request then carries HTTP basic auth whose
// password is the token and whose user name is the operator, recorded in
// the audit stream as "console:<user>" (the browser asks once). The
// actions are those of seqbyctl: skip and dlq move of a halted head,
// dlq replay and dlq drop, pause and resume of a partition or a whole
// handler. Each goes in two steps: the first runs the action's checks
// (its dry run, as seqbyctl's -dry-run) and shows what would be done; the
// second, a confirmation, does it and appends an audit entry. The
// confirmation carries a token its preview issued for that action (valid
// ten minutes, and once), so nothing runs without its dry run having
// been shown. Every mutating request carries a CSRF token, an HMAC under
// a secret the console draws at start of a random cookie
// (SameSite=Strict), which a site that plants a cookie cannot match
// without reading the console's pages (and a planted cookie does not hide
// the console's own); a request the browser marks cross-site is refused
// (http.CrossOriginProtection); and a read-only console refuses every
// one. An action returns to one of the console's
// pages, with its outcome signed so that a crafted link cannot show one.
//
// Pages, and the previews' dry runs, read through an
// inspect.Inspector.ReadOnly: they write nothing to Redis.
// Options.Timeout bounds a whole request (on a client with
// ContextTimeoutEnabled, which runtime.Connect sets); a Redis that fails
// is a 502 (504 when it does not answer in time) with the error. Every value
// read from Redis is escaped (keys and fields may hold markup, quotes or
// any bytes; a value that is not UTF-8 text is shown Go-quoted); no
// secret appears in a page or URL; errors are shown as their text, never
// a stack trace.
package console
