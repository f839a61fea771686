package pooler

import (
	"bytes"
	"regexp"
	"strings"
	"sync"
	"time"
)

// The console's commands, parsed as PgBouncer 1.18 parses them (src/admin.c):
// one command per query, "CMD [arg][;]" or "SET key = value", words
// case-insensitive, "double-quoted" names and 'quoted' SET values
// unquoted. Anything else is "invalid command '<query>', use SHOW HELP;".
const (
	rxWS0    = `[ \t\n\r]*`
	rxWS1    = `[ \t\n\r]+`
	rxWord   = `("([^"]+|"")*"|[0-9a-z_]+)`
	rxString = `('([^']|'')*')`
)

var (
	rxCmd     = longest(`(?i)^` + rxWS0 + rxWord + `(` + rxWS1 + rxWord + `)?` + rxWS0 + `(;` + rxWS0 + `)?$`)
	rxSetWord = longest(`(?i)^` + rxWS0 + `set` + rxWS1 + rxWord + rxWS0 + `(=|to)` + rxWS0 + rxWord + rxWS0 + `(;` + rxWS0 + `)?$`)
	rxSetStr  = longest(`(?i)^` + rxWS0 + `set` + rxWS1 + rxWord + rxWS0 + `(=|to)` + rxWS0 + rxString + rxWS0 + `(;` + rxWS0 + `)?$`)
)

// longest compiles a POSIX-style pattern with leftmost-longest matching,
// as regexec matches.
func longest(expr string) *regexp.Regexp {
	re := regexp.MustCompile(expr)
	re.Longest()
	return re
}

// Group numbers and PgBouncer's buffer sizes (a longer word is "bad
// arguments").
const (
	groupCmd, groupArg              = 1, 4
	groupKey, groupVal              = 1, 4
	maxCmdLen, maxArgLen, maxValLen = 16, 64, 256
)

// copyArg is PgBouncer's copy_arg: group g of the match, unquoted when it
// starts with q; false when it does not fit in max-1 bytes.
func copyArg(q string, m []int, g, max int, quote byte) (string, bool) {
	if m[2*g] < 0 {
		return "", true
	}
	s := q[m[2*g]:m[2*g+1]]
	if len(s) >= max {
		return "", false
	}
	if len(s) >= 2 && s[0] == quote {
		qq := string([]byte{quote, quote})
		return strings.ReplaceAll(s[1:len(s)-1], qq, string(quote)), true
	}
	return s, true
}

// consoleConn is one console connection.
type consoleConn struct {
	c     *client
	u     consoleUser // who logged in, and what they may run
	since time.Time
	// query is the command running, for SHOW ACTIVE_SOCKETS; guarded by
	// consoles.mu.
	busy bool
}

// consoles are the open console connections (the pool "pgbouncer" of
// SHOW POOLS, CLIENTS and SOCKETS) and the console's own statistics.
type consoles struct {
	mu      sync.Mutex
	open    map[*consoleConn]struct{}
	queries int64 // commands run, the "pgbouncer" row of SHOW STATS
	// registered are databases a console command registered from the
	// fallback entry (PgBouncer's find_or_register_database); disabled
	// are the databases DISABLE closed to new clients.
	registered map[string]bool
	disabled   map[string]bool
}

func (p *Proxy) consoleOpened(cc *consoleConn) {
	p.console.mu.Lock()
	defer p.console.mu.Unlock()
	if p.console.open == nil {
		p.console.open = map[*consoleConn]struct{}{}
	}
	p.console.open[cc] = struct{}{}
}

func (p *Proxy) consoleClosed(cc *consoleConn) {
	p.console.mu.Lock()
	defer p.console.mu.Unlock()
	delete(p.console.open, cc)
}

// consoleList lists the open console connections in the order they came.
func (p *Proxy) consoleList() []*consoleConn {
	p.console.mu.Lock()
	defer p.console.mu.Unlock()
	out := make([]*consoleConn, 0, len(p.console.open))
	for cc := range p.console.open {
		out = append(out, cc)
	}
	sortBy(out, func(cc *consoleConn) uint64 { return cc.c.id })
	return out
}

// consoleReply is what a command sends back: bytes to write, and whether
// the connection must then close.
type consoleReply struct {
	b     []byte
	close bool
	pass  *fdHandout // SHOW FDS with descriptors (takeover_old.go), written instead of b
}

// consoleQuery runs one console query and returns the reply. It runs on
// the console connection's goroutine; commands that wait (PAUSE,
// WAIT_CLOSE, SUSPEND) block it until done, as PgBouncer's
// wait_for_response holds the console's answer.
func (p *Proxy) consoleQuery(cc *consoleConn, q string) consoleReply {
	p.console.mu.Lock()
	p.console.queries++
	cc.busy = true
	p.console.mu.Unlock()
	defer func() {
		p.console.mu.Lock()
		cc.busy = false
		p.console.mu.Unlock()
	}()
	x := &consoleCmd{p: p, cc: cc, query: q}
	if m := rxCmd.FindStringSubmatchIndex(q); m != nil {
		cmd, ok1 := copyArg(q, m, groupCmd, maxCmdLen, '"')
		arg, ok2 := copyArg(q, m, groupArg, maxArgLen, '"')
		if !ok1 || !ok2 {
			return x.fail("bad arguments")
		}
		return x.run(cmd, arg)
	}
	for _, set := range []struct {
		re    *regexp.Regexp
		quote byte
	}{{rxSetStr, '\''}, {rxSetWord, '"'}} {
		if m := set.re.FindStringSubmatchIndex(q); m != nil {
			key, ok := copyArg(q, m, groupKey, maxArgLen, '"')
			if !ok || key == "" {
				return x.fail("bad arguments")
			}
			val, ok := copyArg(q, m, groupVal, maxValLen, set.quote)
			if !ok {
				return x.fail("bad arguments")
			}
			return x.set(key, val)
		}
	}
	return x.syntaxError()
}

// consoleCmd is one command being run.
type consoleCmd struct {
	p     *Proxy
	cc    *consoleConn
	query string
}

// fail is PgBouncer's admin_error: logged, and a non-fatal ERROR.
func (x *consoleCmd) fail(msg string) consoleReply {
	x.p.logf("console: %s", msg)
	return consoleReply{b: consoleError(nil, msg)}
}

func (x *consoleCmd) syntaxError() consoleReply {
	return x.fail("invalid command '" + x.query + "', use SHOW HELP;")
}

// needAdmin is the access check (requireAdmin) of commands that need
// admin_users: false, and the error to send, for a stats user.
func (x *consoleCmd) needAdmin() (consoleReply, bool) {
	var b bytes.Buffer
	if requireAdmin(&b, x.cc.u) {
		return consoleReply{}, true
	}
	x.p.logf("console: admin access needed (user %s)", x.cc.u.name)
	return consoleReply{b: b.Bytes()}, false
}

func ready(tag string) consoleReply { return consoleReply{b: commandReady(nil, tag)} }

// run dispatches "CMD [arg]" as PgBouncer's cmd_list does.
func (x *consoleCmd) run(cmd, arg string) consoleReply {
	switch strings.ToLower(cmd) {
	case "show", "select":
		return x.show(arg)
	case "pause":
		return x.pause(arg)
	case "resume":
		return x.resume(arg)
	case "reload":
		return x.reload(arg)
	case "reconnect":
		return x.reconnect(arg)
	case "kill":
		return x.kill(arg)
	case "suspend":
		return x.suspend(arg)
	case "disable":
		return x.disable(arg)
	case "enable":
		return x.enable(arg)
	case "wait_close":
		return x.waitClose(arg)
	case "shutdown":
		return x.shutdown(arg)
	}
	return x.syntaxError()
}

// consoleHelp is SHOW HELP's text, PgBouncer 1.18's.
const consoleHelp = "\n\tSHOW HELP|CONFIG|DATABASES|POOLS|CLIENTS|SERVERS|USERS|VERSION\n" +
	"\tSHOW FDS|SOCKETS|ACTIVE_SOCKETS|LISTS|MEM\n" +
	"\tSHOW DNS_HOSTS|DNS_ZONES\n" +
	"\tSHOW STATS|STATS_TOTALS|STATS_AVERAGES|TOTALS\n" +
	"\tSET key = arg\n" +
	"\tRELOAD\n" +
	"\tPAUSE [<db>]\n" +
	"\tRESUME [<db>]\n" +
	"\tDISABLE <db>\n" +
	"\tENABLE <db>\n" +
	"\tRECONNECT [<db>]\n" +
	"\tKILL <db>\n" +
	"\tSUSPEND\n" +
	"\tSHUTDOWN\n" +
	"\tWAIT_CLOSE [<db>]"

// fakeParams are the settings some clients SHOW or SET on connect; the
// console answers them as PgBouncer's fake_show and fake_set do.
var fakeParams = [][2]string{
	{"client_encoding", "UTF-8"},
	{"default_transaction_isolation", "read committed"},
	{"standard_conforming_strings", "on"},
	{"datestyle", "ISO"},
	{"timezone", "GMT"},
}

func fakeParam(name string) (string, string, bool) {
	for _, f := range fakeParams {
		if strings.EqualFold(f[0], name) {
			return f[0], f[1], true
		}
	}
	return "", "", false
}

// show runs SHOW arg (and SELECT arg).
func (x *consoleCmd) show(arg string) consoleReply {
	if name, val, ok := fakeParam(arg); ok {
		t := newTable("s", name)
		t.row(val)
		return consoleReply{b: t.encode(nil)}
	}
	view, ok := showViews[strings.ToLower(arg)]
	if !ok {
		return x.syntaxError()
	}
	if view.admin {
		if r, ok := x.needAdmin(); !ok {
			return r
		}
	}
	if strings.EqualFold(arg, "fds") && canPassFDs(x.cc.c) {
		// Over the Unix socket from the proxy's own user: the rows carry
		// their descriptors, for an online restart.
		h, err := x.p.handout()
		if err != nil {
			return x.fail(err.Error())
		}
		return consoleReply{pass: h}
	}
	if view.notice != nil {
		return consoleReply{b: view.notice()}
	}
	return consoleReply{b: view.table(x.p).encode(nil)}
}
