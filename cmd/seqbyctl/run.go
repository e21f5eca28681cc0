package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"
	"github.com/seqby/seqby/runtime"
	"github.com/seqby/seqby/runtime/inspect"
)

const usageText = `usage: seqbyctl [-redis URL] [-timeout D] [-json] COMMAND [flags]

commands:
  halted  [-handler NAME]                      list halted partitions
  inspect -handler NAME -stream STREAM         show a partition's head, lease and pending entries
  skip    -handler NAME -stream STREAM -id ID  acknowledge the halted head ID without applying it
  dlq     -handler NAME -stream STREAM -id ID  copy the halted head ID to category:{key}:dlq, then acknowledge it

STREAM: the partition stream, a pm's correlation value, or the stream holding the head.
-redis defaults to $REDIS_URL. Exit 0 ok, 1 refused or failed, 2 usage.
Run "go doc github.com/seqby/seqby/cmd/seqbyctl" for the manual.

global flags:
`

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("seqbyctl", flag.ContinueOnError)
	fs.SetOutput(stderr)
	// Not defaulted in the flag itself: -h would print the URL, password
	// and all.
	url := fs.String("redis", "", "Redis URL (default $REDIS_URL)")
	timeout := fs.Duration("timeout", 10*time.Second, "bound of the whole command")
	asJSON := fs.Bool("json", false, "print halted and inspect as JSON")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usageText)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(stdout)
			fs.Usage()
			return 0
		}
		return 2
	}
	if fs.NArg() == 0 {
		fmt.Fprintln(stderr, "seqbyctl: no command; want halted, inspect, skip or dlq")
		fs.Usage()
		return 2
	}
	cmd, cargs := fs.Arg(0), fs.Args()[1:]
	c, ok := cmds[cmd]
	if !ok {
		fmt.Fprintf(stderr, "seqbyctl: unknown command %q; want halted, inspect, skip or dlq\n", cmd)
		return 2
	}
	sub := flag.NewFlagSet("seqbyctl "+cmd, flag.ContinueOnError)
	sub.SetOutput(stderr)
	o := opts{json: *asJSON, out: stdout}
	sub.StringVar(&o.handler, "handler", "", "handler name (its consumer group; a pm's name)")
	if c.partition {
		sub.StringVar(&o.stream, "stream", "", "partition stream, pm correlation value, or the stream holding the head")
	}
	if c.id {
		sub.StringVar(&o.id, "id", "", "entry id of the halted head (from inspect or halted)")
	}
	if err := sub.Parse(cargs); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if err := c.check(o, sub); err != nil {
		fmt.Fprintf(stderr, "seqbyctl %s: %v\n", cmd, err)
		sub.Usage()
		return 2
	}
	if *url == "" {
		*url = os.Getenv("REDIS_URL")
	}
	if *url == "" {
		fmt.Fprintln(stderr, "seqbyctl: no Redis: pass -redis URL or set REDIS_URL")
		return 2
	}
	if _, err := redis.ParseURL(*url); err != nil {
		// The URL itself is not echoed: it may carry a password.
		fmt.Fprintf(stderr, "seqbyctl: bad -redis URL (want redis://[user:password@]host:port[/db] or rediss://...): %v\n", err)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	client, err := runtime.Connect(ctx, *url)
	if err != nil {
		fmt.Fprintf(stderr, "seqbyctl %s: %v\n", cmd, err)
		return 1
	}
	defer client.Close()
	if err := c.do(ctx, inspect.New(client), o); err != nil {
		fmt.Fprintf(stderr, "seqbyctl %s: %v\n", cmd, err)
		return 1
	}
	return 0
}

// opts are a command's parsed flags.
type opts struct {
	handler, stream, id string
	json                bool
	out                 io.Writer
}

type command struct {
	partition, id bool // takes -stream, -id (both required when taken)
	do            func(context.Context, *inspect.Inspector, opts) error
}

var cmds = map[string]command{
	"halted":  {do: halted},
	"inspect": {partition: true, do: inspectPartition},
	"skip":    {partition: true, id: true, do: resolve(false)},
	"dlq":     {partition: true, id: true, do: resolve(true)},
}

// check reports missing flags and stray arguments.
func (c command) check(o opts, fs *flag.FlagSet) error {
	var missing []string
	if c.partition && o.handler == "" {
		missing = append(missing, "-handler")
	}
	if c.partition && o.stream == "" {
		missing = append(missing, "-stream")
	}
	if c.id && o.id == "" {
		missing = append(missing, "-id")
	}
	if len(missing) > 0 {
		return fmt.Errorf("missing %s", strings.Join(missing, ", "))
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q (flags go before them)", fs.Args())
	}
	return nil
}

func halted(ctx context.Context, in *inspect.Inspector, o opts) error {
	hs, err := in.Halts(ctx, o.handler)
	if err != nil {
		return err
	}
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

func inspectPartition(ctx context.Context, i *inspect.Inspector, o opts) error {
	in, err := i.Inspect(ctx, o.handler, o.stream)
	if err != nil {
		return err
	}
	if o.json {
		return writeJSON(o.out, in)
	}
	w := o.out
	fmt.Fprintf(w, "handler    %s\npartition  %s\n", safe(in.Handler), safe(in.Partition))
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
	keys := make([]string, 0, len(in.Head.Fields))
	for k := range in.Head.Fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(w, "  %s: %s\n", safe(k), safe(in.Head.Fields[k]))
	}
	return nil
}

func resolve(dlq bool) func(context.Context, *inspect.Inspector, opts) error {
	return func(ctx context.Context, in *inspect.Inspector, o opts) error {
		op := in.Skip
		if dlq {
			op = in.MoveToDLQ
		}
		res, err := op(ctx, o.handler, o.stream, o.id)
		if err != nil {
			return err
		}
		if dlq {
			fmt.Fprintf(o.out, "moved %s on %s to %s as %s\n", safe(o.id), safe(res.Record.Stream), safe(res.DLQ), safe(res.DLQEntryID))
		} else {
			fmt.Fprintf(o.out, "skipped %s on %s\n", safe(o.id), safe(res.Record.Stream))
		}
		fmt.Fprintf(o.out, "%s of %s continues with its next entry once an engine claims it (within a lease renewal and a discovery cycle)\n",
			safe(res.Record.Partition), safe(o.handler))
		return nil
	}
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

// oneLine keeps a multi-line error in one table cell.
// safe returns s for printing: as it is when it is valid UTF-8 without
// control characters, else Go-quoted, so a key or field from Redis can
// never inject terminal escapes or fake lines into the output.
func safe(s string) string {
	if utf8.ValidString(s) && strings.IndexFunc(s, unicode.IsControl) < 0 {
		return s
	}
	return strconv.Quote(s)
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
