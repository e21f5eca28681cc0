package redistest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// LostReply loses the replies of chosen calls after Redis ran them, the
// fault that makes a client send a call twice: go-redis resends a command,
// a pipeline or a MULTI/EXEC whose reply it failed to read (io.EOF, a
// reset, a read timeout), although Redis may already have run it, and
// proxies and cluster redirects replay calls too. A test arms it for one
// kind of call at a time (Arm) and gives its Dialer to the client under
// test.
//
// A lost reply is lost whole: the connection that carried the call (a
// single command or a whole pipeline) reads every one of its replies from
// Redis, so Redis ran all of it, then fails the client's read with the
// fault and closes. The client sees only the fault and, when it retries,
// sends the same call again on a new connection.
type LostReply struct {
	mu    sync.Mutex
	rules []*lostRule
	lost  int
}

// Fault is how a reply is lost.
type Fault int

// The faults LostReply can give a client's read.
const (
	// EOF: the connection ends (io.EOF), as when Redis or a proxy closes
	// it after running the call.
	EOF Fault = iota
	// Reset: the connection is reset (ECONNRESET).
	Reset
	// Timeout: the read times out (a net.Error whose Timeout is true), as
	// when the reply comes later than the client's read timeout.
	Timeout
)

// Faults are every Fault, for tests that try each.
var Faults = []Fault{EOF, Reset, Timeout}

func (f Fault) String() string {
	switch f {
	case EOF:
		return "eof"
	case Reset:
		return "reset"
	case Timeout:
		return "timeout"
	}
	return "fault(" + strconv.Itoa(int(f)) + ")"
}

// err is the error a client's read gets for f.
func (f Fault) err() error {
	switch f {
	case Reset:
		return &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}
	case Timeout:
		return &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
	}
	return io.EOF
}

// Match reports whether a command, given as its arguments (name first, as
// sent: "EVALSHA", sha, numkeys, keys..., args...), is one whose call
// loses its reply.
type Match func(args []string) bool

type lostRule struct {
	match Match
	fault Fault
	left  int
}

// Arm makes the next n calls that carry a command match accepts lose
// their reply with fault. A pipeline or MULTI/EXEC carrying such a
// command loses every reply of the call. Rules armed earlier go first.
func (l *LostReply) Arm(match Match, fault Fault, n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.rules = append(l.rules, &lostRule{match: match, fault: fault, left: n})
}

// Disarm drops every rule still armed.
func (l *LostReply) Disarm() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.rules = nil
}

// Lost is how many calls have lost their reply so far.
func (l *LostReply) Lost() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lost
}

// Armed is how many more calls the armed rules will make lose their
// reply.
func (l *LostReply) Armed() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, r := range l.rules {
		n += r.left
	}
	return n
}

// take returns the fault for a call carrying cmds and counts it, or false
// when no armed rule matches.
func (l *LostReply) take(cmds [][]string) (Fault, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range l.rules {
		if r.left <= 0 {
			continue
		}
		for _, c := range cmds {
			if r.match(c) {
				r.left--
				l.lost++
				return r.fault, true
			}
		}
	}
	return 0, false
}

// Dialer wraps dial (nil: a plain TCP dialer), for a go-redis
// Options.Dialer or ClusterOptions.Dialer: its connections lose the
// replies of the calls armed.
func (l *LostReply) Dialer(dial func(ctx context.Context, network, addr string) (net.Conn, error)) func(ctx context.Context, network, addr string) (net.Conn, error) {
	if dial == nil {
		d := &net.Dialer{Timeout: 5 * time.Second}
		dial = d.DialContext
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &lossyConn{Conn: c, l: l}, nil
	}
}

// lossyConn parses the commands its client writes. A call is what the
// client writes before it reads: go-redis writes a command or a whole
// pipeline, then reads the replies. When a call carries a command an armed
// rule matches, the connection reads and drops every reply of the call
// and fails the client's read.
type lossyConn struct {
	net.Conn
	l *LostReply

	wbuf    []byte     // written bytes not yet parsed into whole commands
	call    [][]string // the commands of the call being written
	reading bool       // the client has read since it last wrote
	doomed  bool
	fault   Fault
	failed  error // the error every read returns once the reply was lost
}

func (c *lossyConn) Write(p []byte) (int, error) {
	if c.failed != nil {
		return 0, c.failed
	}
	if c.reading {
		// A write after a read begins the next call.
		c.reading, c.call, c.doomed = false, nil, false
	}
	c.wbuf = append(c.wbuf, p...)
	for {
		args, n, err := parseCommand(c.wbuf)
		if err != nil {
			return 0, fmt.Errorf("redistest: lost reply: %w", err)
		}
		if n == 0 {
			break
		}
		c.wbuf = c.wbuf[n:]
		c.call = append(c.call, args)
	}
	return c.Conn.Write(p)
}

func (c *lossyConn) Read(p []byte) (int, error) {
	if c.failed != nil {
		return 0, c.failed
	}
	if !c.reading {
		c.reading = true
		c.fault, c.doomed = c.l.take(c.call)
	}
	if !c.doomed {
		return c.Conn.Read(p)
	}
	// Redis runs the commands of a connection in order and answers each:
	// once the call's last reply is in, Redis ran all of it.
	r := bufio.NewReader(c.Conn)
	for range c.call {
		if err := skipReply(r); err != nil {
			c.failed = err
			c.Conn.Close()
			return 0, err
		}
	}
	c.failed = c.fault.err()
	c.Conn.Close()
	return 0, c.failed
}

// parseCommand parses one RESP array of bulk strings (a client's command)
// at the start of b: its arguments and length, or n 0 when b does not
// hold a whole one yet.
func parseCommand(b []byte) (args []string, n int, err error) {
	line, rest, ok := cutLine(b)
	if !ok {
		return nil, 0, nil
	}
	if len(line) == 0 || line[0] != '*' {
		return nil, 0, fmt.Errorf("a command is not an array: %q", line)
	}
	count, err := strconv.Atoi(string(line[1:]))
	if err != nil {
		return nil, 0, fmt.Errorf("a command's length: %w", err)
	}
	n = len(b) - len(rest)
	for range count {
		line, rest2, ok := cutLine(rest)
		if !ok {
			return nil, 0, nil
		}
		if len(line) == 0 || line[0] != '$' {
			return nil, 0, fmt.Errorf("a command's argument is not a bulk string: %q", line)
		}
		size, err := strconv.Atoi(string(line[1:]))
		if err != nil {
			return nil, 0, fmt.Errorf("an argument's length: %w", err)
		}
		if len(rest2) < size+2 {
			return nil, 0, nil
		}
		args = append(args, string(rest2[:size]))
		rest = rest2[size+2:]
		n = len(b) - len(rest)
	}
	return args, n, nil
}

// cutLine splits b after its first CRLF.
func cutLine(b []byte) (line, rest []byte, ok bool) {
	for i := 0; i+1 < len(b); i++ {
		if b[i] == '\r' && b[i+1] == '\n' {
			return b[:i], b[i+2:], true
		}
	}
	return nil, b, false
}

// skipReply reads one whole reply (RESP2 or RESP3) from r. A RESP3 push
// message is not a call's reply: it is skipped along with what follows.
func skipReply(r *bufio.Reader) error {
	line, err := r.ReadString('\n')
	if err != nil {
		return err
	}
	if len(line) < 3 {
		return errors.New("redistest: lost reply: a short reply line")
	}
	body := line[1 : len(line)-2]
	switch line[0] {
	case '+', '-', ':', '_', ',', '#', '(':
		return nil
	case '$', '!', '=':
		size, err := strconv.Atoi(body)
		if err != nil {
			return fmt.Errorf("redistest: lost reply: %w", err)
		}
		if size < 0 {
			return nil
		}
		_, err = r.Discard(size + 2)
		return err
	case '*', '~', '%', '|', '>':
		size, err := strconv.Atoi(body)
		if err != nil {
			return fmt.Errorf("redistest: lost reply: %w", err)
		}
		if line[0] == '%' || line[0] == '|' {
			size *= 2
		}
		for range max(size, 0) {
			if err := skipReply(r); err != nil {
				return err
			}
		}
		if line[0] == '|' || line[0] == '>' {
			// An attribute precedes the reply it describes; a push is
			// out of band: the call's reply is still to come.
			return skipReply(r)
		}
		return nil
	}
	return fmt.Errorf("redistest: lost reply: unknown reply type %q", line[0])
}
