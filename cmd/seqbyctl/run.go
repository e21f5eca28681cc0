package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/signal"
	"os/user"
	"runtime/debug"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"
	"github.com/seqby/seqby/internal/version"
	"github.com/seqby/seqby/runtime"
	"github.com/seqby/seqby/runtime/inspect"
)

// opts are the parsed flags, global and the command's.
type opts struct {
	redis   string
	timeout time.Duration
	json    bool
	quiet   bool
	version bool

	handler, stream, id, as string
	category                string
	backfill                string
	value                   string // a pm's correlation value
	dryRun                  bool
	all                     bool // pause, resume: the whole handler
	verifyBound             time.Duration
	addr                    string // serve
	write                   bool   // serve
	n                       int

	out    io.Writer // stdout, or io.Discard with -q
	errOut io.Writer // stderr: warnings
}

// command is one command line: its words ("dlq replay"), flags and action.
type command struct {
	name     string
	synopsis string   // its flags, for usage lines
	summary  string   // one line, for the command list
	about    string   // what help COMMAND says
	flags    []string // its own flags (names in flagDefs)
	required []string
	// long: the command runs until SIGINT or SIGTERM (serve), not
	// within -timeout, which then bounds only connecting.
	long bool
	do   func(ctx context.Context, in *inspect.Inspector, o *opts) error
}

var commands = []*command{
	{name: "halted", synopsis: "[-handler NAME]", flags: []string{"handler"},
		summary: "list halted partitions; exit 1 when there are any",
		about: `Lists the halted partitions of NAME (of every handler without -handler):
handler, partition, the stream holding the head, its entry id, type, reason,
the halting owner's lease token, when, and the error. Only records whose head
is still pending are listed; stale ones are removed. Exits 1 when it lists a
halt (0 when none), so a script or a check can run "seqbyctl -q halted".`,
		do: halted},
	{name: "partitions", synopsis: "-handler NAME [-backfill SUFFIX]", flags: []string{"handler", "backfill"}, required: []string{"handler"},
		summary: "a handler's partitions: owner, generation, pending, lag, halted, paused, idle",
		about: `Lists one row per partition of every category NAME reads (an unpartitioned
category's stream is one row with key "-"): key, stream, owner and generation
(from the lease token "<owner_id>~<incarnation>:<generation>"; "-" when free),
pending (entries delivered to the handler and not acked),
lag (entries not delivered to it yet), halted (a halt record exists), paused
(an operator paused it or the whole handler: seqbyctl pause) and idle (time since the newest entry was appended, from its id, on Redis's clock). Pending and lag add up the partition
stream and its backfill lane (-backfill: the engines' BackfillSuffix, when
they set one).`,
		do: partitions},
	{name: "inspect", synopsis: "-handler NAME -stream STREAM [-category CATEGORY] [-backfill SUFFIX]", flags: []string{"handler", "stream", "category", "backfill"}, required: []string{"handler", "stream"},
		summary: "a partition's halt record, lease, pending entries and head",
		about: `Shows the partition's halt record, its lease (token and remaining TTL), each
of its streams with length and the group's pending entries (consumer, idle
time, deliveries), and the head entry with all its fields. For a sequential
pm's partition stream the lease is the pm's on the correlation value
({value}:__pmlease__:NAME), and the streams are the value's in every category
the pm reads. With -category, -stream may be the bare key: -category order
-stream client-1 is -stream 'order:{client-1}'.`,
		do: inspectPartition},
	{name: "state", synopsis: "-handler NAME -value VALUE", flags: []string{"handler", "value"}, required: []string{"handler", "value"},
		summary: "a process manager's stored state for a correlation value",
		about: `Shows the state the pm NAME stored for the correlation value VALUE: the Redis
hash holding it ({VALUE}:__pmstate__:NAME), its version (the number of saves),
for a sequential pm the last entry of each stream the state includes, and the
state itself as indented JSON (the engine stores a pm's state as JSON, whatever
codec its messages use). With -json, an object with pm, value, key, version,
applied and state. It reads the engines' default state store, Redis; a pm
whose engines set Options.StateStore keeps its state elsewhere.`,
		do: pmState},
	{name: "skip", synopsis: "-handler NAME -stream STREAM [-category CATEGORY] -id ID [-dry-run] [-as WHO]", flags: []string{"handler", "stream", "category", "id", "dry-run", "as"},
		required: []string{"handler", "stream", "id"},
		summary:  "acknowledge the halted head ID without applying it",
		about: `Acknowledges the halted head ID without applying it, removes the halt record
and deletes the lease, so the next owner continues with the entry after it.
One Redis script checks first that the partition is still halted with the
same record, that no other owner is retrying the head, and that ID is still
the head; otherwise nothing changes (exit 1).`,
		do: resolve(false)},
	{name: "dlq move", synopsis: "-handler NAME -stream STREAM [-category CATEGORY] -id ID [-dry-run] [-as WHO]", flags: []string{"handler", "stream", "category", "id", "dry-run", "as"},
		required: []string{"handler", "stream", "id"},
		summary:  "copy the halted head ID to category:{key}:dlq, then skip it (also: dlq)",
		about: `Is skip that first copies the head to the partition's dead-letter stream
category:{key}:dlq (the entry's fields plus dlq_stream, dlq_entry_id,
dlq_handler, dlq_partition, dlq_reason, dlq_error), in the same script.
"seqbyctl dlq" with these flags is the same command.`,
		do: resolve(true)},
	{name: "dlq list", synopsis: "[-handler NAME]", flags: []string{"handler"},
		summary: "list dead-letter entries",
		about: `Lists the entries of every dead-letter stream (category:{key}:dlq), of those
NAME moved there with -handler: the DLQ and the entry's id in it, when it was
moved, the handler, partition, stream and entry id the head had, its type,
message id, reason and error (the dlq_* fields), and, with -json, the
message's own fields.`,
		do: dlqList},
	{name: "dlq replay", synopsis: "-stream DLQSTREAM -id ID [-dry-run] [-as WHO]", flags: []string{"dlqstream", "dlqid", "dry-run", "as"},
		required: []string{"stream", "id"},
		summary:  "re-publish a dead-letter entry to the end of its partition, then delete it",
		about: `Re-publishes the message of entry ID of DLQSTREAM (category:{key}:dlq) to the
end of its partition, category:{key}, as the publisher does (indexed, then
appended, then signalled, so idle engines wake up), keeping its fields and
message id but without the publisher's dedup of message ids, and then deletes
the entry from the DLQ. The entry also gets replay_of, replay_stream,
replay_dlq, replay_dlq_id and replay_handler: the original entry, this DLQ
entry and the handler that halted, which a handler reads as
runtime.MessageInfo.Replay.

Every handler of the category gets the message again, after the entries
published since the original. The handler that halted never applied it: if
it skips entries whose per-key sequence it has passed (the usual guard
against a re-run after a crash), it must apply a replay meant for it
(Replay.Handler) anyway, once (by Replay.DLQEntryID). For the other
handlers it is a duplicate of the original they handled.`,
		do: dlqReplay},
	{name: "dlq drop", synopsis: "-stream DLQSTREAM -id ID [-dry-run] [-as WHO]", flags: []string{"dlqstream", "dlqid", "dry-run", "as"},
		required: []string{"stream", "id"},
		summary:  "delete a dead-letter entry",
		about:    `Deletes entry ID from DLQSTREAM (and the stream with its last entry).`,
		do:       dlqDrop},
	{name: "pause", synopsis: "-handler NAME (-stream STREAM [-category CATEGORY] | -all) [-verify-bound D] [-dry-run] [-as WHO]", flags: []string{"handler", "stream", "category", "all", "verify-bound", "dry-run", "as"},
		required: []string{"handler"},
		summary:  "stop a partition (or, with -all, every partition of a handler) until resume",
		about: `Pauses the partition STREAM of NAME: the event in flight, if any, finishes and
no later event of the key starts, on any engine, until "seqbyctl resume". The
partition stays owned and costs nothing while paused; the pause outlives
handovers, restarts and the reaper. It is a mark in the partition's slot
(field paused of category:{key}:__lease__:NAME:__meta__) that every call an attempt starts
under checks; the command returns once no attempt can start any more: it
waits the engines' VerifyBound after storing the mark (-verify-bound, 25ms,
their default; give theirs when they set Options.VerifyBound), or longer,
the admitted confirmation age an engine recorded over a link slower than
that (at most half its LeaseTTL), and a margin for the clocks (1/512 of it
and 1ms).

With -all instead of -stream it pauses every partition of NAME: the engines
stop starting its events from their next discovery cycle
(Options.DiscoveryInterval); an engine that cannot read the pause stops
once its last successful read is two cycles old. A partition paused
already is left as it is.
Both are recorded in the audit stream.`,
		do: pauseCmd},
	{name: "resume", synopsis: "-handler NAME (-stream STREAM [-category CATEGORY] | -all) [-dry-run] [-as WHO]", flags: []string{"handler", "stream", "category", "all", "dry-run", "as"},
		required: []string{"handler"},
		summary:  "end a pause; the partition goes on with its next event",
		about: `Ends the pause of the partition STREAM of NAME and wakes its owner, which goes
on with the next event of the key within one wake-up. With -all it ends the
pause of the whole handler (its engines go on from their next discovery
cycle); pauses of single partitions stay. Exits 1 when it was not paused.
Recorded in the audit stream.`,
		do: resumeCmd},
	{name: "paused", synopsis: "[-handler NAME]", flags: []string{"handler"},
		summary: "list paused handlers and partitions; exit 1 when there are any",
		about: `Lists the pauses of NAME (of every handler without -handler): handler,
partition ("*" for the whole handler), who paused it and when, and the Redis
key holding the pause. Exits 1 when it lists a pause (0 when none), as halted
does.`,
		do: pausedCmd},
	{name: "serve", synopsis: "[-addr HOST:PORT] [-write] [-verify-bound D] [-backfill SUFFIX]", flags: []string{"addr", "write", "verify-bound", "backfill"},
		long:    true,
		summary: "run the operator console, a web page, until interrupted",
		about: `Serves the operator console (package runtime/inspect/console) on -addr,
127.0.0.1:8080 by default (only this machine; give 0.0.0.0:8080 to serve
others, behind TLS), until SIGINT or SIGTERM. It prints the URL it serves.

The console is read-only unless -write is given, which needs the token of
write access in $SEQBY_CONSOLE_TOKEN (never on the command line, where
other users could read it): each action then asks the browser for a user
name (the operator the audit stream records, as console:NAME) and the
token as password.`,
		do: serve},
	{name: "audit", synopsis: "[-n N]", flags: []string{"n"},
		summary: "the newest operator actions, from seqby:__audit__",
		about: `Lists the newest N entries (default 20) of the audit stream seqby:__audit__,
newest first: who did what, when, on which handler, partition, stream and
entry, and the result. skip, dlq move, dlq replay and dlq drop append one
after every change; the stream keeps about the last 10,000.`,
		do: auditLog},
}

// subcommands of dlq; "dlq" alone is "dlq move".
var dlqSubs = map[string]bool{"move": true, "list": true, "replay": true, "drop": true}

// flagDefs defines each flag on a flag set, by a key that is the flag's
// name except for the dead-letter variants of -stream and -id.
var flagDefs = map[string]func(fs *flag.FlagSet, o *opts){
	// Not defaulted in the flag itself: help would print the URL,
	// password and all.
	"redis": func(fs *flag.FlagSet, o *opts) {
		fs.StringVar(&o.redis, "redis", "", "Redis `URL` (default $REDIS_URL)")
	},
	"timeout": func(fs *flag.FlagSet, o *opts) {
		fs.DurationVar(&o.timeout, "timeout", 10*time.Second, "bound of the whole command")
	},
	"json": func(fs *flag.FlagSet, o *opts) { fs.BoolVar(&o.json, "json", false, "print JSON") },
	"q": func(fs *flag.FlagSet, o *opts) {
		fs.BoolVar(&o.quiet, "q", false, "print nothing on stdout (the exit status tells)")
	},
	"version": func(fs *flag.FlagSet, o *opts) {
		fs.BoolVar(&o.version, "version", false, "print the version and exit")
	},
	"handler": func(fs *flag.FlagSet, o *opts) {
		fs.StringVar(&o.handler, "handler", "", "handler `NAME` (its registration name and consumer group; a pm's name)")
	},
	"stream": func(fs *flag.FlagSet, o *opts) {
		fs.StringVar(&o.stream, "stream", "", "the partition: its `STREAM` (category:{key}; with -category, the bare key), or while halted a pm's correlation value or the stream holding the head")
	},
	"category": func(fs *flag.FlagSet, o *opts) {
		fs.StringVar(&o.category, "category", "", "the partition's `CATEGORY`, so -stream may be the bare key: -category order -stream client-1 is order:{client-1}")
	},
	"id": func(fs *flag.FlagSet, o *opts) {
		fs.StringVar(&o.id, "id", "", "entry `ID` of the halted head (as halted or inspect print it)")
	},
	// dlq replay and drop name a dead-letter entry with the same flags.
	"dlqstream": func(fs *flag.FlagSet, o *opts) {
		fs.StringVar(&o.stream, "stream", "", "the dead-letter stream `DLQSTREAM` (category:{key}:dlq)")
	},
	"dlqid": func(fs *flag.FlagSet, o *opts) {
		fs.StringVar(&o.id, "id", "", "entry `ID` in the dead-letter stream (as dlq list prints it)")
	},
	"value": func(fs *flag.FlagSet, o *opts) {
		fs.StringVar(&o.value, "value", "", "the pm's correlation `VALUE` (o-1; the key of its partition streams, order:{o-1})")
	},
	"addr": func(fs *flag.FlagSet, o *opts) {
		fs.StringVar(&o.addr, "addr", "127.0.0.1:8080", "the `HOST:PORT` to serve on")
	},
	"write": func(fs *flag.FlagSet, o *opts) {
		fs.BoolVar(&o.write, "write", false, "allow actions, with the token in $SEQBY_CONSOLE_TOKEN")
	},
	"verify-bound": func(fs *flag.FlagSet, o *opts) {
		fs.DurationVar(&o.verifyBound, "verify-bound", 25*time.Millisecond, "the engines' Options.VerifyBound, which pause waits out after storing the pause")
	},
	"all": func(fs *flag.FlagSet, o *opts) {
		fs.BoolVar(&o.all, "all", false, "the whole handler: every partition of it")
	},
	"dry-run": func(fs *flag.FlagSet, o *opts) {
		fs.BoolVar(&o.dryRun, "dry-run", false, "check and print what would be done; change nothing")
	},
	"as": func(fs *flag.FlagSet, o *opts) {
		fs.StringVar(&o.as, "as", "", "the operator (`WHO`) the audit stream records (default $USER@hostname)")
	},
	"n": func(fs *flag.FlagSet, o *opts) { fs.IntVar(&o.n, "n", 20, "how many entries, newest first") },
	"backfill": func(fs *flag.FlagSet, o *opts) {
		fs.StringVar(&o.backfill, "backfill", "backfill", "the engines' backfill lane `SUFFIX` (Options.BackfillSuffix)")
	},
}

var globalFlags = []string{"redis", "timeout", "json", "q", "version"}

// valueFlags take a value (the next argument unless given as -f=v).
var valueFlags = map[string]bool{"addr": true, "verify-bound": true, "redis": true, "timeout": true, "handler": true, "stream": true, "category": true, "id": true, "as": true, "n": true, "backfill": true, "value": true}

// exitStatus ends the command with a status and nothing more to say.
type exitStatus int

func (e exitStatus) Error() string { return "exit status " + strconv.Itoa(int(e)) }

func run(args []string, stdout, stderr io.Writer) int {
	words, flagArgs, help := split(args)
	name, rest := commandName(words)
	var o opts
	if name == "help" {
		return printHelp(stdout, stderr, strings.Join(rest, " "))
	}
	c := lookup(name)
	if name != "" && c == nil {
		fmt.Fprintf(stderr, "seqbyctl: unknown command %q%s; run seqbyctl help\n", name, suggestCommand(name, commandWords()))
		return 2
	}
	if name == "dlq move" && len(rest) > 0 && !dlqSubs[rest[0]] {
		// "dlq lst": a mistyped subcommand, not a stray argument of move.
		var subs []string
		for s := range dlqSubs {
			subs = append(subs, s)
		}
		slices.Sort(subs)
		fmt.Fprintf(stderr, "seqbyctl: unknown command \"dlq %s\"%s; the dlq commands are %s\n", rest[0], suggestCommand(rest[0], subs), strings.Join(subs, ", "))
		return 2
	}
	fs := flag.NewFlagSet("seqbyctl", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "%sRun \"seqbyctl help\" for the commands and flags.\n", usageLine(c))
	}
	for _, f := range globalFlags {
		flagDefs[f](fs, &o)
	}
	if c != nil {
		for _, f := range c.flags {
			flagDefs[f](fs, &o)
		}
	}
	if err := fs.Parse(flagArgs); err != nil {
		return 2 // the flag package said why
	}
	// An empty value given on purpose (-handler "$H" with H unset) must not
	// read as "every handler".
	var empty []string
	fs.Visit(func(f *flag.Flag) {
		if valueFlags[f.Name] && f.Value.String() == "" {
			empty = append(empty, "-"+f.Name)
		}
	})
	if len(empty) > 0 {
		fmt.Fprintf(stderr, "seqbyctl: %s given an empty value; leave the flag out, or give it a value\n", strings.Join(empty, ", "))
		return 2
	}
	switch {
	case o.version:
		bi, _ := debug.ReadBuildInfo()
		fmt.Fprintln(stdout, version.Line("seqbyctl", bi))
		return 0
	case help && c == nil:
		return printHelp(stdout, stderr, "")
	case help:
		return printHelp(stdout, stderr, c.name)
	case c == nil:
		fmt.Fprintln(stderr, "seqbyctl: no command")
		fs.Usage()
		return 2
	}
	if err := c.check(&o, rest); err != nil {
		fmt.Fprintf(stderr, "seqbyctl %s: %v\n", c.name, err)
		fs.Usage()
		return 2
	}
	if o.redis == "" {
		o.redis = os.Getenv("REDIS_URL")
	}
	if o.redis == "" {
		fmt.Fprintln(stderr, "seqbyctl: no Redis: pass -redis URL or set REDIS_URL")
		return 2
	}
	if err := checkURL(o.redis); err != nil {
		// The URL itself is not echoed: it may carry a password.
		fmt.Fprintf(stderr, "seqbyctl: bad -redis URL (want redis://[user:password@]host:port[/db], rediss://..., or sentinels: redis://sentinel:port?master_name=NAME[&addr=sentinel2:port]): %v\n", err)
		return 2
	}
	o.out, o.errOut = stdout, stderr
	if o.quiet {
		o.out = io.Discard
	}
	if o.as == "" {
		o.as = defaultWho()
	}
	// go-redis logs its pool's dial failures itself, on stderr, several
	// lines before the error it returns reaches us: seqbyctl says what
	// failed once, in its own words, so the library's logger is silenced.
	redis.SetLogger(silentLogger{})
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	client, err := runtime.Connect(ctx, o.redis)
	if err != nil {
		fmt.Fprintf(stderr, "seqbyctl %s: %s (is Redis up, and do -redis or $REDIS_URL name it?)\n", c.name, safe(err.Error()))
		return 1
	}
	defer client.Close()
	in := inspect.New(client)
	if o.backfill != "" {
		in = in.WithBackfillSuffix(o.backfill)
	}
	if c.long {
		var stop context.CancelFunc
		ctx, stop = signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
	}
	err = c.do(ctx, in, &o)
	var status exitStatus
	switch {
	case err == nil:
		return 0
	case errors.As(err, &status):
		return int(status)
	}
	// Errors may carry names read from Redis: quoted when they hold
	// control or format characters, as everything printed is.
	fmt.Fprintf(stderr, "seqbyctl %s: %s\n", c.name, safe(err.Error()))
	return 1
}

// silentLogger drops go-redis's internal log lines (redis.SetLogger):
// every failure they report also comes back as an error, which run
// prints.
type silentLogger struct{}

func (silentLogger) Printf(context.Context, string, ...any) {}

// split separates the command words from the flags (with their values),
// so flags may come before, between or after the words. help reports -h,
// -help or --help, which are taken out.
func split(args []string) (words, flags []string, help bool) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return append(words, args[i+1:]...), flags, help
		}
		if len(a) < 2 || a[0] != '-' {
			words = append(words, a)
			continue
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if name == "h" || name == "help" {
			on, err := strconv.ParseBool(value)
			help = help || !hasValue || (err == nil && on) // -help=false asks for no help
			continue
		}
		flags = append(flags, a)
		if valueFlags[name] && !hasValue && i+1 < len(args) {
			flags = append(flags, args[i+1])
			i++
		}
	}
	return words, flags, help
}

// commandName joins the command words: "dlq" takes a subcommand ("dlq
// move" without one).
func commandName(words []string) (name string, rest []string) {
	switch {
	case len(words) == 0:
		return "", nil
	case words[0] == "dlq" && len(words) > 1 && dlqSubs[words[1]]:
		return "dlq " + words[1], words[2:]
	case words[0] == "dlq":
		return "dlq move", words[1:]
	}
	return words[0], words[1:]
}

func lookup(name string) *command {
	for _, c := range commands {
		if c.name == name {
			return c
		}
	}
	return nil
}

// suggestCommand is " (did you mean X?)" for the command word nearest
// name, or "".
func suggestCommand(name string, words []string) string {
	return inspect.DidYouMean(name, words)
}

// commandWords are the first words of the commands, and help.
func commandWords() []string {
	out := []string{"help"}
	for _, c := range commands {
		if w, _, _ := strings.Cut(c.name, " "); !slices.Contains(out, w) {
			out = append(out, w)
		}
	}
	return out
}

// check reports missing flags, bad values and stray arguments.
func (c *command) check(o *opts, rest []string) error {
	var missing []string
	for _, f := range c.required {
		var v string
		switch f {
		case "handler":
			v = o.handler
		case "stream":
			v = o.stream
		case "id":
			v = o.id
		case "value":
			v = o.value
		}
		if v == "" {
			missing = append(missing, "-"+f)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("missing %s", strings.Join(missing, ", "))
	}
	if len(rest) > 0 {
		return fmt.Errorf("unexpected arguments %q (values go after their flags: -handler NAME)", rest)
	}
	if slices.Contains(c.flags, "all") {
		// pause, resume: a partition or the whole handler, exactly one.
		switch {
		case o.all && o.stream != "":
			return errors.New("give -stream (a partition) or -all (the whole handler), not both")
		case !o.all && o.stream == "":
			return errors.New("missing -stream (a partition) or -all (the whole handler)")
		}
	}
	if o.write && os.Getenv(consoleTokenEnv) == "" {
		return fmt.Errorf("-write needs the token of write access in $%s", consoleTokenEnv)
	}
	if slices.Contains(c.flags, "n") && o.n < 1 {
		return fmt.Errorf("-n %d: want at least 1", o.n)
	}
	if o.timeout <= 0 {
		return fmt.Errorf("-timeout %v: want a positive duration", o.timeout)
	}
	return o.streamOfCategory()
}

// streamOfCategory makes -stream a partition stream when -category names
// its category: a bare key becomes category:{key}; a stream must be one
// of the category.
func (o *opts) streamOfCategory() error {
	switch {
	case o.category == "":
		return nil
	case strings.ContainsAny(o.category, "{}"):
		return fmt.Errorf("-category %q: a category has no braces; give the category alone (order), the key with -stream", o.category)
	case !strings.ContainsAny(o.stream, "{}"):
		o.stream = o.category + ":{" + o.stream + "}"
		return nil
	case strings.HasPrefix(o.stream, o.category+":{") && strings.HasSuffix(o.stream, "}"):
		return nil
	}
	return fmt.Errorf("-stream %q is not a partition stream of -category %s: give the bare key with -category (-category %s -stream KEY), or the stream alone", o.stream, o.category, o.category)
}

// bareKeyHint adds to an error matching inspect.ErrNoPartition, when
// -stream is a bare key without -category, how to name it.
func bareKeyHint(err error, o *opts) error {
	if errors.Is(err, inspect.ErrNoPartition) && o.category == "" && !strings.ContainsAny(o.stream, "{}") {
		return fmt.Errorf("%w; for the bare key %s, add -category CATEGORY (or give -stream 'CATEGORY:{%s}')", err, o.stream, o.stream)
	}
	return err
}

func usageLine(c *command) string {
	if c == nil {
		return "usage: seqbyctl COMMAND [flags]\n"
	}
	return fmt.Sprintf("usage: seqbyctl %s %s\n", c.name, c.synopsis)
}

const globalHelp = `global flags (before or after the command words):
  -redis URL   Redis URL, redis://[user:password@]host:port[/db] or rediss://...
               (default $REDIS_URL); a node of a cluster names the cluster
  -timeout D   bound of the whole command (default 10s)
  -json        print JSON
  -q           print nothing on stdout; the exit status tells
  -version     print the version
  -h, -help    print help
`

// printHelp prints the command list, or the help of the commands named
// topic ("dlq": all of dlq's).
func printHelp(stdout, stderr io.Writer, topic string) int {
	if topic == "" {
		fmt.Fprint(stdout, "usage: seqbyctl COMMAND [flags]\n\ncommands:\n")
		for _, c := range append(commands, &command{name: "help", synopsis: "[COMMAND]", summary: "this text, or a command's"}) {
			fmt.Fprintf(stdout, "  %-11s %s\n  %-11s %s\n", c.name, c.synopsis, "", c.summary)
		}
		fmt.Fprint(stdout, `
STREAM: a partition stream (order:{client-1}; with -category order, the bare
key client-1), a halted pm's correlation value, or the stream holding the head;
pause and resume also take the bare key of a handler that reads one category.
DLQSTREAM: category:{key}:dlq.
skip, dlq move, dlq replay and dlq drop take -dry-run (check and print, change
nothing) and record who, when and what in seqby:__audit__ (-as WHO).

`+globalHelp+`
Exit status: 0 done (halted: none listed), 1 refused or failed (halted: halts
listed), 2 usage.
Run "go doc github.com/seqby/seqby/cmd/seqbyctl" for the manual.
`)
		return 0
	}
	var found []*command
	for _, c := range commands {
		if c.name == topic || strings.HasPrefix(c.name, topic+" ") {
			found = append(found, c)
		}
	}
	if len(found) == 0 {
		fmt.Fprintf(stderr, "seqbyctl help: unknown command %q%s; run seqbyctl help\n", topic, suggestCommand(topic, commandWords()))
		return 2
	}
	for i, c := range found {
		if i > 0 {
			fmt.Fprintln(stdout)
		}
		fmt.Fprintf(stdout, "%s\n%s\n", usageLine(c), c.about)
		if len(c.flags) > 0 {
			fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
			fs.SetOutput(stdout)
			var o opts
			for _, f := range c.flags {
				flagDefs[f](fs, &o)
			}
			fmt.Fprintln(stdout, "\nflags:")
			fs.PrintDefaults()
		}
	}
	fmt.Fprint(stdout, "\n"+globalHelp)
	return 0
}

// defaultWho is $USER@hostname, for the audit stream.
func defaultWho() string {
	name := os.Getenv("USER")
	if name == "" {
		if u, err := user.Current(); err == nil {
			name = u.Username
		}
	}
	host, _ := os.Hostname()
	return orDefault(name, "unknown") + "@" + orDefault(host, "unknown")
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

func halted(ctx context.Context, in *inspect.Inspector, o *opts) error {
	if o.handler != "" {
		if _, err := in.Handler(ctx, o.handler); err != nil {
			return err
		}
	}
	hs, err := in.Halts(ctx, o.handler)
	if err != nil {
		return err
	}
	if err := printHalts(o, hs); err != nil {
		return err
	}
	if len(hs) > 0 {
		return exitStatus(1)
	}
	return nil
}

func printHalts(o *opts, hs []inspect.HaltRecord) error {
	if o.json {
		return writeJSON(o.out, hs)
	}
	if len(hs) == 0 {
		fmt.Fprintln(o.out, "no halted partitions")
		return nil
	}
	w := tabwriter.NewWriter(o.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "HANDLER\tPARTITION\tSTREAM\tENTRY\tTYPE\tREASON\tTOKEN\tSINCE\tERROR")
	for _, h := range hs {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", safe(h.Handler), safe(h.Partition), safe(h.Stream), safe(h.EntryID),
			orDash(safe(h.MessageType)), safe(h.Reason), safe(h.Token), h.At.Format(time.RFC3339), orDash(safe(oneLine(h.Error))))
	}
	return w.Flush()
}

func partitions(ctx context.Context, in *inspect.Inspector, o *opts) error {
	ps, err := in.Partitions(ctx, o.handler)
	if err != nil {
		return err
	}
	if o.json {
		return writeJSON(o.out, ps)
	}
	if len(ps) == 0 {
		fmt.Fprintf(o.out, "no partitions of %s\n", safe(o.handler))
		return nil
	}
	w := tabwriter.NewWriter(o.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "KEY\tSTREAM\tOWNER\tGENERATION\tPENDING\tLAG\tHALTED\tPAUSED\tIDLE")
	for _, p := range ps {
		gen, idle, halted, paused := "-", "-", "no", "no"
		if p.Paused {
			paused = "yes"
		}
		if p.Owner != "" {
			gen = strconv.FormatInt(p.Generation, 10)
		}
		if p.Idle >= 0 {
			idle = p.Idle.Round(time.Second).String()
		}
		if p.Halted {
			halted = "yes"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\t%s\n", orDash(safe(p.Key)), safe(p.Stream), orDash(safe(p.Owner)), gen,
			p.Pending, p.Lag, halted, paused, idle)
	}
	return w.Flush()
}

func inspectPartition(ctx context.Context, i *inspect.Inspector, o *opts) error {
	if err := i.CheckPartition(ctx, o.handler, o.stream); err != nil {
		return bareKeyHint(err, o)
	}
	in, err := i.Inspect(ctx, o.handler, o.stream)
	if err != nil {
		return err
	}
	if o.json {
		return writeJSON(o.out, in)
	}
	w := o.out
	fmt.Fprintf(w, "handler    %s\n", safe(in.Handler))
	if in.PM {
		fmt.Fprintf(w, "partition  %s (a pm's correlation value: one lease over its streams below)\n", safe(in.Partition))
	} else {
		fmt.Fprintf(w, "partition  %s\n", safe(in.Partition))
	}
	if h := in.Halt; h != nil {
		fmt.Fprintf(w, "halted     yes, on %s %s since %s by %s: %s\n", safe(h.Stream), safe(h.EntryID), h.At.Format(time.RFC3339), safe(h.Token), safe(h.Reason))
		if h.Error != "" {
			fmt.Fprintf(w, "error      %s\n", safe(oneLine(h.Error)))
		}
	} else if in.Stale {
		fmt.Fprintln(w, "halted     no (its halt record was stale: the head is no longer pending; record removed)")
	} else {
		fmt.Fprintln(w, "halted     no (no halt record)")
	}
	if in.Lease != "" {
		fmt.Fprintf(w, "lease      %s held by %s (ttl %v)\n", safe(in.LeaseKey), safe(in.Lease), in.LeaseTTL)
	} else {
		fmt.Fprintf(w, "lease      %s free\n", safe(in.LeaseKey))
	}
	for _, l := range in.Lanes {
		if !l.Exists {
			fmt.Fprintf(w, "stream     %s: does not exist\n", safe(l.Stream))
			continue
		}
		fmt.Fprintf(w, "stream     %s: length %d, %d pending\n", safe(l.Stream), l.Length, len(l.Pending))
		for _, p := range l.Pending {
			fmt.Fprintf(w, "  pending  %s  consumer %s  idle %v  deliveries %d\n", safe(p.ID), safe(p.Consumer), p.Idle, p.Deliveries)
		}
	}
	if in.Head == nil {
		fmt.Fprintln(w, "head       none pending")
		return nil
	}
	fmt.Fprintf(w, "head       %s on %s\n", safe(in.Head.ID), safe(in.Head.Stream))
	if in.Head.Fields == nil {
		fmt.Fprintln(w, "  (deleted from the stream while pending)")
	}
	printFields(w, "  ", in.Head.Fields)
	return nil
}

func pmState(ctx context.Context, in *inspect.Inspector, o *opts) error {
	st, err := in.PMState(ctx, o.handler, o.value)
	if err != nil {
		return err
	}
	if o.json {
		return writeJSON(o.out, st)
	}
	w := o.out
	fmt.Fprintf(w, "pm       %s\n", safe(st.PM))
	fmt.Fprintf(w, "value    %s\n", safe(st.Value))
	fmt.Fprintf(w, "key      %s\n", safe(st.Key))
	fmt.Fprintf(w, "version  %d\n", st.Version)
	if len(st.Applied) == 0 {
		fmt.Fprintln(w, "applied  -")
	}
	streams := make([]string, 0, len(st.Applied))
	for s := range st.Applied {
		streams = append(streams, s)
	}
	sort.Strings(streams)
	for i, s := range streams {
		label := "applied "
		if i > 0 {
			label = "        "
		}
		fmt.Fprintf(w, "%s %s up to %s\n", label, safe(s), safe(st.Applied[s]))
	}
	fmt.Fprintln(w, "state")
	var pretty bytes.Buffer
	if err := json.Indent(&pretty, st.State, "", "  "); err != nil {
		return fmt.Errorf("indent the state of pm %s for %q: %w", st.PM, st.Value, err)
	}
	// Line by line through safe: a JSON string may hold format characters
	// (bidi overrides) that must not reach the terminal raw.
	for _, line := range strings.Split(pretty.String(), "\n") {
		fmt.Fprintf(w, "  %s\n", safe(line))
	}
	return nil
}

func printFields(w io.Writer, indent string, fields map[string]string) {
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(w, "%s%s: %s\n", indent, safe(k), safe(fields[k]))
	}
}

// action is what a command that changes something prints: the audit
// entry it recorded (or, with -dry-run, would have: then ID is "").
type action struct {
	DryRun bool `json:"dry_run"`
	inspect.AuditEntry
}

// finish prints what was done (or would be done), and records it in the
// audit stream unless it is a dry run. done is the text line for a real
// run, would the one for a dry run.
func finish(ctx context.Context, in *inspect.Inspector, o *opts, a inspect.AuditEntry, done, would string) error {
	a.Who = o.as
	a.When = time.Now().UTC()
	var auditErr error
	if !o.dryRun {
		a, auditErr = in.Audit(ctx, a)
	}
	if o.json {
		if err := writeJSON(o.out, action{DryRun: o.dryRun, AuditEntry: a}); err != nil {
			return err
		}
	} else if o.dryRun {
		fmt.Fprintf(o.out, "dry run: %s\nevery check passed; nothing changed\n", would)
	} else {
		fmt.Fprintln(o.out, done)
		if auditErr == nil {
			fmt.Fprintf(o.out, "audit entry %s in seqby:__audit__\n", a.ID)
		}
	}
	if auditErr != nil {
		return fmt.Errorf("done, but recording it failed (note it yourself: %s by %s): %w", a.Result, a.Who, auditErr)
	}
	return nil
}

func resolve(dlq bool) func(context.Context, *inspect.Inspector, *opts) error {
	return func(ctx context.Context, in *inspect.Inspector, o *opts) error {
		if err := in.CheckPartition(ctx, o.handler, o.stream); err != nil {
			return bareKeyHint(err, o)
		}
		var op func(context.Context, string, string, string) (inspect.Resolution, error)
		switch {
		case dlq && o.dryRun:
			op = in.CheckMoveToDLQ
		case dlq:
			op = in.MoveToDLQ
		case o.dryRun:
			op = in.CheckSkip
		default:
			op = in.Skip
		}
		res, err := op(ctx, o.handler, o.stream, o.id)
		if err != nil {
			return err
		}
		r := res.Record
		a := inspect.AuditEntry{Command: "skip", Handler: o.handler, Partition: r.Partition, Stream: r.Stream, EntryID: o.id,
			Result: "acknowledged unapplied; halt record and lease removed"}
		done := fmt.Sprintf("skipped %s on %s", safe(o.id), safe(r.Stream))
		would := fmt.Sprintf("would skip %s on %s, the halted head of %s of %s", safe(o.id), safe(r.Stream), safe(r.Partition), safe(o.handler))
		if dlq {
			a.Command = "dlq move"
			a.Result = fmt.Sprintf("copied to %s as %s, then acknowledged; halt record and lease removed", res.DLQ, res.DLQEntryID)
			done = fmt.Sprintf("moved %s on %s to %s as %s", safe(o.id), safe(r.Stream), safe(res.DLQ), safe(res.DLQEntryID))
			would = fmt.Sprintf("would move %s on %s, the halted head of %s of %s, to %s", safe(o.id), safe(r.Stream), safe(r.Partition), safe(o.handler), safe(res.DLQ))
			if o.dryRun {
				a.Result = "would copy to " + res.DLQ + ", then acknowledge"
			}
		} else if o.dryRun {
			a.Result = "would acknowledge unapplied"
		}
		done += fmt.Sprintf("\n%s of %s continues with its next entry once an engine claims it (within a lease renewal and a discovery cycle)",
			safe(r.Partition), safe(o.handler))
		return finish(ctx, in, o, a, done, would)
	}
}

// auditGrace bounds the audit entry of a pause that Pause stored but
// could not settle before the command's time was up: it is recorded
// after the -timeout, within this much more.
const auditGrace = 5 * time.Second

func pauseCmd(ctx context.Context, in *inspect.Inspector, o *opts) error {
	in = in.WithVerifyBound(o.verifyBound)
	var p inspect.Pause
	var err error
	switch {
	case o.all && o.dryRun:
		p, err = in.CheckPauseHandler(ctx, o.handler)
	case o.all:
		p, err = in.PauseHandler(ctx, o.handler, o.as)
	case o.dryRun:
		p, err = in.CheckPause(ctx, o.handler, o.stream)
	default:
		p, err = in.Pause(ctx, o.handler, o.stream, o.as)
	}
	// Unsettled: the mark is stored but Pause could not wait out the
	// attempts confirmed before it (it read until the command's time was
	// up): record it all the same, then fail.
	unsettled := errors.Is(err, inspect.ErrUnsettled)
	if errors.Is(err, inspect.ErrNotWoken) {
		// Paused all the same: say so, and record it.
		fmt.Fprintln(o.errOut, "seqbyctl pause: warning:", err)
	} else if err != nil && !unsettled {
		return bareKeyHint(err, o)
	}
	// p.Partition is the partition stream a bare key named.
	what := safe(cmp.Or(p.Partition, o.stream)) + " of " + safe(o.handler)
	if o.all {
		what = "every partition of " + safe(o.handler)
	}
	if p.Already {
		if unsettled {
			return err
		}
		if o.json {
			return writeJSON(o.out, p)
		}
		fmt.Fprintf(o.out, "%s is paused already (by %s at %s); nothing changed\n", what, safe(p.By), p.At.Format(time.RFC3339))
		return nil
	}
	a := inspect.AuditEntry{Command: "pause", Handler: o.handler, Partition: p.Partition, Stream: p.Partition,
		Result: "paused (" + p.Mark + ")"}
	done := "paused " + what + "\nno later event of it starts until seqbyctl resume; the one in flight, if any, finishes"
	if unsettled {
		a.Result = "paused (" + p.Mark + "), unsettled: an attempt confirmed just before it may still start"
		done = "paused " + what + " (the mark is stored), but an attempt confirmed just before it may still start"
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), auditGrace)
		defer cancel()
		if ferr := finish(actx, in, o, a, done, ""); ferr != nil {
			return fmt.Errorf("%w; %w", err, ferr)
		}
		return err
	}
	if o.all {
		a.Partition, a.Result = "*", "paused every partition ("+p.Mark+")"
		done = "paused " + what + "\nits engines start no event of it from their next discovery cycle until seqbyctl resume -all"
	}
	if o.dryRun {
		a.Result = "would pause"
	}
	return finish(ctx, in, o, a, done, "would pause "+what)
}

func resumeCmd(ctx context.Context, in *inspect.Inspector, o *opts) error {
	var p inspect.Pause
	var err error
	switch {
	case o.all && o.dryRun:
		p, err = in.CheckResumeHandler(ctx, o.handler)
	case o.all:
		p, err = in.ResumeHandler(ctx, o.handler)
	case o.dryRun:
		p, err = in.CheckResume(ctx, o.handler, o.stream)
	default:
		p, err = in.Resume(ctx, o.handler, o.stream)
	}
	if errors.Is(err, inspect.ErrNotWoken) {
		// Resumed all the same: say so, and record it.
		fmt.Fprintln(o.errOut, "seqbyctl resume: warning:", err)
	} else if err != nil {
		return bareKeyHint(err, o)
	}
	what := safe(cmp.Or(p.Partition, o.stream)) + " of " + safe(o.handler)
	a := inspect.AuditEntry{Command: "resume", Handler: o.handler, Partition: p.Partition, Stream: p.Partition,
		Result: fmt.Sprintf("resumed (paused by %s at %s)", p.By, p.At.Format(time.RFC3339))}
	done := "resumed " + what + "; its owner goes on with the next event"
	if o.all {
		what = "every partition of " + safe(o.handler)
		a.Partition = "*"
		done = "resumed " + what + "; its engines go on from their next discovery cycle (pauses of single partitions stay)"
	}
	if o.dryRun {
		a.Result = "would resume"
	}
	return finish(ctx, in, o, a, done, fmt.Sprintf("would resume %s, paused by %s at %s", what, safe(p.By), p.At.Format(time.RFC3339)))
}

func pausedCmd(ctx context.Context, in *inspect.Inspector, o *opts) error {
	if o.handler != "" {
		if _, err := in.Handler(ctx, o.handler); err != nil {
			return err
		}
	}
	ps, err := in.Paused(ctx, o.handler)
	if err != nil {
		return err
	}
	if o.json {
		if err := writeJSON(o.out, ps); err != nil {
			return err
		}
	} else if len(ps) == 0 {
		fmt.Fprintln(o.out, "no paused handlers or partitions")
	} else {
		w := tabwriter.NewWriter(o.out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "HANDLER\tPARTITION\tBY\tSINCE\tMARK")
		for _, p := range ps {
			part := p.Partition
			if part == "" {
				part = "*"
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", safe(p.Handler), safe(part), orDash(safe(p.By)), p.At.Format(time.RFC3339), safe(p.Mark))
		}
		if err := w.Flush(); err != nil {
			return err
		}
	}
	if len(ps) > 0 {
		return exitStatus(1)
	}
	return nil
}

func dlqList(ctx context.Context, in *inspect.Inspector, o *opts) error {
	ds, err := in.DLQEntries(ctx, o.handler)
	if err != nil {
		return err
	}
	if o.json {
		return writeJSON(o.out, ds)
	}
	if len(ds) == 0 {
		fmt.Fprintln(o.out, "no dead-letter entries")
		return nil
	}
	w := tabwriter.NewWriter(o.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "DLQ\tID\tMOVED\tHANDLER\tPARTITION\tSTREAM\tENTRY\tTYPE\tREASON\tERROR")
	for _, d := range ds {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", safe(d.DLQ), safe(d.ID), d.MovedAt.Format(time.RFC3339),
			orDash(safe(d.Handler)), orDash(safe(d.Partition)), orDash(safe(d.Stream)), orDash(safe(d.EntryID)),
			orDash(safe(d.MessageType)), orDash(safe(d.Reason)), orDash(safe(oneLine(d.Error))))
	}
	return w.Flush()
}

func dlqReplay(ctx context.Context, in *inspect.Inspector, o *opts) error {
	op := in.ReplayDLQ
	if o.dryRun {
		op = in.CheckReplayDLQ
	}
	rep, err := op(ctx, o.stream, o.id)
	if err != nil && !rep.Published {
		return err
	}
	d := rep.Entry
	a := inspect.AuditEntry{Command: "dlq replay", Handler: d.Handler, Partition: d.Partition, Stream: d.DLQ, EntryID: d.ID,
		Result: fmt.Sprintf("re-published to the end of %s, then deleted from the DLQ", rep.Stream)}
	if err != nil {
		// Published, but the DLQ entry was not deleted by this replay: the
		// audit says so, and so does the exit status.
		a.Result = fmt.Sprintf("re-published to the end of %s; %v", rep.Stream, err)
	} else if o.dryRun {
		a.Result = fmt.Sprintf("would re-publish to the end of %s, then delete from the DLQ", rep.Stream)
	}
	done := fmt.Sprintf("replayed %s of %s to the end of %s (type %s, message id %s); engines pick it up from there",
		safe(d.ID), safe(d.DLQ), safe(rep.Stream), orDash(safe(d.MessageType)), orDash(safe(d.MessageID)))
	would := fmt.Sprintf("would replay %s of %s to the end of %s (type %s, message id %s), then delete it from %s",
		safe(d.ID), safe(d.DLQ), safe(rep.Stream), orDash(safe(d.MessageType)), orDash(safe(d.MessageID)), safe(d.DLQ))
	if ferr := finish(ctx, in, o, a, done, would); ferr != nil {
		return errors.Join(err, ferr)
	}
	return err
}

func dlqDrop(ctx context.Context, in *inspect.Inspector, o *opts) error {
	op := in.DropDLQ
	if o.dryRun {
		op = in.CheckDropDLQ
	}
	d, err := op(ctx, o.stream, o.id)
	if err != nil {
		return err
	}
	a := inspect.AuditEntry{Command: "dlq drop", Handler: d.Handler, Partition: d.Partition, Stream: d.DLQ, EntryID: d.ID,
		Result: fmt.Sprintf("deleted (it was %s %s of %s, type %s)", d.Stream, d.EntryID, d.Partition, orDash(d.MessageType))}
	if o.dryRun {
		a.Result = "would delete"
	}
	done := fmt.Sprintf("dropped %s of %s", safe(d.ID), safe(d.DLQ))
	would := fmt.Sprintf("would drop %s of %s (%s %s of %s, type %s)", safe(d.ID), safe(d.DLQ), safe(d.Stream), safe(d.EntryID),
		safe(d.Partition), orDash(safe(d.MessageType)))
	return finish(ctx, in, o, a, done, would)
}

func auditLog(ctx context.Context, in *inspect.Inspector, o *opts) error {
	es, err := in.AuditLog(ctx, o.n)
	if err != nil {
		return err
	}
	if o.json {
		return writeJSON(o.out, es)
	}
	if len(es) == 0 {
		fmt.Fprintln(o.out, "no audit entries")
		return nil
	}
	w := tabwriter.NewWriter(o.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tWHEN\tWHO\tCOMMAND\tHANDLER\tPARTITION\tSTREAM\tENTRY\tRESULT")
	for _, e := range es {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", safe(e.ID), e.When.Format(time.RFC3339), safe(e.Who), safe(e.Command),
			orDash(safe(e.Handler)), orDash(safe(e.Partition)), orDash(safe(e.Stream)), orDash(safe(e.EntryID)), safe(oneLine(e.Result)))
	}
	return w.Flush()
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// safe returns s for printing: as it is when it is valid UTF-8 without
// control characters, else Go-quoted, so a key or field from Redis can
// never inject terminal escapes or fake lines into the output.
func safe(s string) string {
	unsafe := func(r rune) bool { return unicode.IsControl(r) || unicode.Is(unicode.Cf, r) } // Cf: bidi overrides and the like
	if utf8.ValidString(s) && strings.IndexFunc(s, unsafe) < 0 {
		return s
	}
	return strconv.Quote(s)
}

// oneLine keeps a multi-line error in one table cell.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// checkURL parses a Redis URL as runtime.Connect will: one naming
// sentinels (it has a master_name) in go-redis's failover form, any other
// as one server's.
func checkURL(raw string) error {
	if u, err := url.Parse(raw); err == nil && u.Query().Has("master_name") {
		_, err := redis.ParseFailoverURL(raw)
		return err
	}
	_, err := redis.ParseURL(raw)
	return err
}
