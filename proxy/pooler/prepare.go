package pooler

import (
	"bytes"
	"container/list"
	"encoding/binary"
	"slices"
	"strconv"
	"sync"
)

// Prepared statements in transaction and statement pooling
// (max_prepared_statements > 0), as PgBouncer 1.21+ does it (src/prepare.c):
//
//   - A named Parse from a client maps the client's name to a proxy-wide
//     statement, one per distinct query text and parameter types, named
//     PGBOUNCER_<id>. The Parse goes to the server under that name, unless
//     the linked server has it already: then nothing is sent and the client
//     gets a ParseComplete of the proxy's own, in its place in the stream.
//   - Bind and Describe of a named statement are rewritten to the proxy-wide
//     name. When the linked server lacks the statement a Parse is sent first
//     and its ParseComplete is swallowed.
//   - Each server keeps at most MaxPreparedStatements statements: beyond
//     that the least recently used is closed on the server (the
//     CloseComplete is swallowed).
//   - Close of a named statement only forgets the client's name; it is
//     answered by the proxy and needs no server.
//   - A CommandComplete "DEALLOCATE ALL" or "DISCARD ALL" forgets the
//     server's statements and the linked client's names.
//
// To keep the response stream in order under pipelining every request sent
// to a server is recorded in the server's queue with what to do with its
// response: forward it, skip it (injected Parse, eviction Close) or answer
// it with a fake (Parse the server had, Close while responses are still
// due). The queue is popped as responses arrive, like PgBouncer's
// outstanding requests (RA_FORWARD, RA_SKIP, RA_FAKE).

// Texts of the client errors, as PgBouncer sends them (FATAL 08P01, then the
// connection is closed).
const (
	errStmtNameInUse = "prepared statement name is already in use"
	errStmtNotExist  = "prepared statement did not exist"
	errBadPacket     = "failed to parse packet"
)

// stmtNamePrefix starts every proxy-wide statement name (PgBouncer's
// PREPARED_STMT_NAME_FORMAT "PGBOUNCER_%" PRIu64).
const stmtNamePrefix = "PGBOUNCER_"

// psEntry is one distinct statement: query text plus parameter types.
type psEntry struct {
	id    uint64
	name  string // PGBOUNCER_<id>
	key   string // the Parse body after the statement name: query, parameter count and types
	parse []byte // the whole Parse message under the proxy-wide name; immutable
	refs  int    // client names and server caches holding it; guarded by psRegistry.mu
}

// psRegistry is the proxy-wide hash of statements (PgBouncer's global
// prepared_statements). An entry lives while a client name or a server
// cache refers to it; ids are never reused.
type psRegistry struct {
	mu    sync.Mutex
	byKey map[string]*psEntry
	next  uint64
}

// get returns the entry of key, creating it, with one more reference.
func (r *psRegistry) get(key []byte) *psEntry {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e := r.byKey[string(key)]; e != nil {
		e.refs++
		return e
	}
	if r.byKey == nil {
		r.byKey = map[string]*psEntry{}
	}
	r.next++
	e := &psEntry{id: r.next, name: stmtNamePrefix + strconv.FormatUint(r.next, 10), key: string(key), refs: 1}
	e.parse = appendMsg(nil, msgParse, []byte(e.name), []byte{0}, key)
	r.byKey[e.key] = e
	return e
}

func (r *psRegistry) ref(e *psEntry) {
	r.mu.Lock()
	e.refs++
	r.mu.Unlock()
}

// unref drops one reference of each entry; an unreferenced entry leaves the
// registry.
func (r *psRegistry) unref(es ...*psEntry) {
	if len(es) == 0 {
		return
	}
	r.mu.Lock()
	for _, e := range es {
		e.refs--
		if e.refs == 0 && r.byKey[e.key] == e {
			delete(r.byKey, e.key)
		}
	}
	r.mu.Unlock()
}

// size is the number of entries (tests, SHOW).
func (r *psRegistry) size() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.byKey)
}

// Response actions of a queued request.
type psAction uint8

const (
	raForward psAction = iota // the client sent it: forward the response
	raSkip                    // the proxy sent it: swallow the response
	raFake                    // not sent: answer the client when its turn comes
)

// psReq is one request sent to a server (or answered by the proxy) whose
// response is still due.
type psReq struct {
	typ byte // the request's message type: P B D E C S Q F, c f (CopyDone, CopyFail)
	act psAction
	// stmt is, for a Parse, the statement this Parse registered on the
	// server (unregistered if the Parse fails); for an eviction Close, the
	// evicted statement, whose cache reference the request holds until the
	// CloseComplete (re-registered if the Close is skipped after an error).
	stmt *psEntry
}

// psServer is a server connection's prepared statements and its queue of
// expected responses. It belongs to the loop.
type psServer struct {
	cache   map[*psEntry]*list.Element
	lru     list.List // of *psEntry: front is least recently used
	queue   []psReq
	head    int  // queue[head:] are pending
	failed  bool // an ErrorResponse came since the last ReadyForQuery
	copying bool // in COPY mode: Sync is ignored by the server until CopyDone/CopyFail
	dead    bool // the connection is closed and its statements released
}

func (ps *psServer) pending() int { return len(ps.queue) - ps.head }

func (ps *psServer) push(r psReq) {
	switch {
	case ps.head == 0:
	case ps.head == len(ps.queue):
		ps.queue, ps.head = ps.queue[:0], 0
	case ps.head >= 64 && ps.head*2 >= len(ps.queue):
		// A pipeline that never drains: move the pending part down.
		n := copy(ps.queue, ps.queue[ps.head:])
		clear(ps.queue[n:])
		ps.queue, ps.head = ps.queue[:n], 0
	}
	ps.queue = append(ps.queue, r)
}

// has reports whether e is prepared on the server.
func (ps *psServer) has(e *psEntry) bool {
	_, ok := ps.cache[e]
	return ok
}

// touch makes e the most recently used statement.
func (ps *psServer) touch(e *psEntry) {
	if el := ps.cache[e]; el != nil {
		ps.lru.MoveToBack(el)
	}
}

// add puts e in the cache as the most recently used, taking over a
// reference the caller holds (false if it is there already or the server is
// gone: the caller keeps the reference).
func (ps *psServer) add(e *psEntry) bool {
	if ps.dead || ps.has(e) {
		return false
	}
	if ps.cache == nil {
		ps.cache = map[*psEntry]*list.Element{}
	}
	ps.cache[e] = ps.lru.PushBack(e)
	return true
}

// remove takes e out of the cache; the caller now holds its reference.
func (ps *psServer) remove(e *psEntry) bool {
	el := ps.cache[e]
	if el == nil {
		return false
	}
	ps.lru.Remove(el)
	delete(ps.cache, e)
	return true
}

// register records that the Parse just queued (the last request) prepares e
// on the server, then evicts least recently used statements beyond max,
// appending a Close for each to out and queuing its CloseComplete to skip.
func (ps *psServer) register(reg *psRegistry, e *psEntry, max int, out []byte) []byte {
	if ps.add(e) {
		reg.ref(e)
		ps.queue[len(ps.queue)-1].stmt = e
	}
	for len(ps.cache) > max {
		old := ps.lru.Front().Value.(*psEntry)
		ps.remove(old)
		out = appendMsg(out, msgClose, []byte{targetStatement}, []byte(old.name), []byte{0})
		ps.push(psReq{typ: msgClose, act: raSkip, stmt: old})
	}
	return out
}

// pop removes the oldest pending request if its type is one of types and
// reports whether its response is to be skipped. A request to fake is
// never popped here: fakes are answered by takeFakes.
func (ps *psServer) pop(reg *psRegistry, types ...byte) (popped, skip bool) {
	if ps.pending() == 0 {
		return false, false
	}
	r := ps.queue[ps.head]
	if r.act == raFake || !slices.Contains(types, r.typ) {
		return false, false
	}
	ps.queue[ps.head] = psReq{}
	ps.head++
	if r.typ == msgClose && r.stmt != nil { // an eviction done: drop the cache's reference
		reg.unref(r.stmt)
	}
	return true, r.act == raSkip
}

// clearUntil drops pending requests up to and including the first one of
// a type in types: the server skipped them (error, COPY). A Parse that
// registered a statement unregisters it; an eviction Close that did not
// happen puts its statement back.
func (ps *psServer) clearUntil(reg *psRegistry, types ...byte) {
	for ps.pending() > 0 {
		r := ps.queue[ps.head]
		ps.queue[ps.head] = psReq{}
		ps.head++
		switch {
		case r.typ == msgParse && r.stmt != nil:
			if ps.remove(r.stmt) {
				reg.unref(r.stmt)
			}
		case r.typ == msgClose && r.stmt != nil:
			if !ps.add(r.stmt) {
				reg.unref(r.stmt)
			}
		}
		if slices.Contains(types, r.typ) {
			return
		}
	}
}

// clearCopy drops, up to the first CopyDone or CopyFail, the requests that
// get no response of their own once COPY FROM STDIN ends: the Syncs the
// server ignored in COPY mode and the CopyDone or CopyFail itself. The
// Query or Execute that started the COPY stays: its response is still due.
func (ps *psServer) clearCopy() {
	end := ps.head
	for end < len(ps.queue) {
		t := ps.queue[end].typ
		end++
		if t == msgCopyDone || t == msgCopyFail {
			break
		}
	}
	k := ps.head
	for i := ps.head; i < end; i++ {
		switch ps.queue[i].typ {
		case msgSync, msgCopyDone, msgCopyFail:
		default:
			ps.queue[k] = ps.queue[i]
			k++
		}
	}
	k += copy(ps.queue[k:], ps.queue[end:])
	clear(ps.queue[k:])
	ps.queue = ps.queue[:k]
}

// takeFakes pops the fake requests at the head of the queue and appends
// their responses to w.
func (ps *psServer) takeFakes(w []byte) []byte {
	for ps.pending() > 0 && ps.queue[ps.head].act == raFake {
		w = appendMsg(w, fakeResponse(ps.queue[ps.head].typ))
		ps.queue[ps.head] = psReq{}
		ps.head++
	}
	return w
}

// fakeResponse is the response type the proxy sends for a request it
// answers itself: ParseComplete or CloseComplete.
func fakeResponse(req byte) byte {
	if req == msgParse {
		return msgParseComplete
	}
	return msgCloseComplete
}

// forget releases every statement of the server's cache (DEALLOCATE ALL,
// DISCARD ALL).
func (ps *psServer) forget(reg *psRegistry) {
	var es []*psEntry
	for e := range ps.cache {
		es = append(es, e)
	}
	ps.lru.Init()
	clear(ps.cache)
	reg.unref(es...)
}

// release frees everything of a closed server.
func (ps *psServer) release(reg *psRegistry) {
	if ps.dead {
		return
	}
	ps.forget(reg)
	for _, r := range ps.queue[ps.head:] {
		if r.typ == msgClose && r.stmt != nil {
			reg.unref(r.stmt)
		}
	}
	ps.queue, ps.head = nil, 0
	ps.dead = true
}

// count is the number of statements prepared on the server (SHOW SERVERS).
func (ps *psServer) count() int {
	return len(ps.cache)
}

// appendMsg appends a message of type typ whose body is the concatenation
// of parts.
func appendMsg(b []byte, typ byte, parts ...[]byte) []byte {
	n := 4
	for _, p := range parts {
		n += len(p)
	}
	b = append(b, typ, 0, 0, 0, 0)
	binary.BigEndian.PutUint32(b[len(b)-4:], uint32(n))
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

// cstring splits a NUL-terminated string off the front of b.
func cstring(b []byte) (s, rest []byte, ok bool) {
	i := bytes.IndexByte(b, 0)
	if i < 0 {
		return nil, nil, false
	}
	return b[:i], b[i+1:], true
}

// validParseTail checks the part of a Parse body after the name: the query,
// then the parameter count and that many type OIDs.
func validParseTail(b []byte) bool {
	_, rest, ok := cstring(b)
	if !ok || len(rest) < 2 {
		return false
	}
	n := int(binary.BigEndian.Uint16(rest))
	return len(rest) == 2+4*n
}

// namedStmtClose reports whether a Close message body closes a named
// statement (the only Close the proxy answers itself) and its name.
func namedStmtClose(body []byte) (name []byte, ok bool) {
	if len(body) < 2 || body[0] != targetStatement {
		return nil, false
	}
	name, rest, ok := cstring(body[1:])
	if !ok || len(name) == 0 || len(rest) != 0 {
		return nil, false
	}
	return name, true
}

// psRequest handles one whole message of a client that tracks prepared
// statements (raw: type, length, body), linked to s: it appends what to send
// to s to out and records the responses to expect. A non-empty fatal is the
// error to disconnect the client with; nothing but a count has changed
// then.
func (c *client) psRequest(s *server, raw, out []byte) (_ []byte, fatal string) {
	px := c.px
	reg := &px.ps
	typ, body := raw[0], raw[5:]
	ps := &s.ps
	switch typ {
	case msgParse:
		name, tail, ok := cstring(body)
		if ok && len(name) == 0 { // unnamed: passes through, as it is
			ps.push(psReq{typ: msgParse})
			return append(out, raw...), ""
		}
		if !ok || !validParseTail(tail) {
			return out, errBadPacket
		}
		if c.stmts[string(name)] != nil {
			return out, errStmtNameInUse
		}
		c.pool.counts.clientParses++
		e := reg.get(tail)
		if c.stmts == nil {
			c.stmts = map[string]*psEntry{}
		}
		c.stmts[string(name)] = e
		if ps.has(e) {
			c.fake(ps, msgParse)
			return out, ""
		}
		out = append(out, e.parse...)
		c.pool.counts.serverParses++
		ps.push(psReq{typ: msgParse})
		return ps.register(reg, e, c.pool.psMax, out), ""
	case msgBind:
		portal, rest, ok := cstring(body)
		if !ok {
			return out, errBadPacket
		}
		name, rest, ok := cstring(rest)
		if !ok {
			return out, errBadPacket
		}
		if len(name) == 0 {
			ps.push(psReq{typ: msgBind})
			return append(out, raw...), ""
		}
		c.pool.counts.binds++ // counted before the lookup, as PgBouncer does
		e := c.stmts[string(name)]
		if e == nil {
			return out, errStmtNotExist
		}
		out = c.ensure(ps, e, out)
		ps.push(psReq{typ: msgBind})
		return appendMsg(out, msgBind, portal, []byte{0}, []byte(e.name), []byte{0}, rest), ""
	case msgDescribe:
		if len(body) < 2 {
			return out, errBadPacket
		}
		name, rest, ok := cstring(body[1:])
		if !ok || len(rest) != 0 {
			return out, errBadPacket
		}
		if body[0] != targetStatement || len(name) == 0 {
			ps.push(psReq{typ: msgDescribe})
			return append(out, raw...), ""
		}
		e := c.stmts[string(name)]
		if e == nil {
			return out, errStmtNotExist
		}
		out = c.ensure(ps, e, out)
		ps.push(psReq{typ: msgDescribe})
		return appendMsg(out, msgDescribe, []byte{targetStatement}, []byte(e.name), []byte{0}), ""
	case msgClose: // a Close of a portal or of the unnamed statement
		ps.push(psReq{typ: msgClose})
		return append(out, raw...), ""
	}
	return append(out, raw...), ""
}

// ensure prepares e on the server unless it is there: a Parse whose
// ParseComplete is skipped.
func (c *client) ensure(ps *psServer, e *psEntry, out []byte) []byte {
	if ps.has(e) {
		ps.touch(e)
		return out
	}
	out = append(out, e.parse...)
	c.pool.counts.serverParses++
	ps.push(psReq{typ: msgParse, act: raSkip})
	return ps.register(&c.px.ps, e, c.pool.psMax, out)
}

// fake answers a request the proxy does not send (a Parse the server has, a
// Close of a client's name): at once when no response is due from the
// server, else when the responses before it have been forwarded.
func (c *client) fake(ps *psServer, req byte) {
	if ps != nil && ps.pending() > 0 {
		ps.push(psReq{typ: req, act: raFake})
		return
	}
	var b [5]byte
	c.px.loop.send(&c.sk, appendMsg(b[:0], fakeResponse(req)))
}

// psTrack records a request forwarded as it is (Query, Sync, Execute,
// FunctionCall, CopyDone, CopyFail).
func (c *client) psTrack(s *server, typ byte) {
	switch typ {
	case msgQuery, msgSync, msgExecute, msgFunctionCall, msgCopyDone, msgCopyFail:
		s.ps.push(psReq{typ: typ})
	}
}

// psClose handles a client's Close of a named statement: the name is
// forgotten and the proxy answers, with no server needed.
func (c *client) psClose(name []byte, n int) {
	if e := c.stmts[string(name)]; e != nil {
		delete(c.stmts, string(name))
		c.px.ps.unref(e)
	}
	c.pool.counts.received += int64(n)
	if s := c.server; s != nil {
		c.fake(&s.ps, msgClose)
		return
	}
	c.fake(nil, msgClose)
}

// psResponse notes one server message (not ReadyForQuery; msg is the
// message or, for a large one, its start) before it is forwarded and
// reports whether it is to be skipped.
func (c *client) psResponse(s *server, typ byte, msg []byte) (skip bool) {
	reg := &c.px.ps
	ps := &s.ps
	n := len(msg)
	switch typ {
	case msgParseComplete:
		_, skip = ps.pop(reg, msgParse)
	case msgBindComplete:
		_, skip = ps.pop(reg, msgBind)
	case msgCloseComplete:
		_, skip = ps.pop(reg, msgClose)
	case msgNoData, msgRowDescription:
		_, skip = ps.pop(reg, msgDescribe)
	case msgEmptyQueryResponse, msgPortalSuspended:
		_, skip = ps.pop(reg, msgExecute)
	case msgCommandComplete:
		if ps.copying {
			ps.copying = false
			ps.clearCopy()
		}
		whole := n >= 5 && int(binary.BigEndian.Uint32(msg[1:]))+1 == n
		if whole && (n == 5+len("DISCARD ALL")+1 || n == 5+len("DEALLOCATE ALL")+1) {
			if tag := string(msg[5 : n-1]); tag == "DISCARD ALL" || tag == "DEALLOCATE ALL" {
				ps.forget(reg)
				c.forgetStmts()
			}
		}
		ps.pop(reg, msgExecute)
	case msgErrorResponse: // the server skips to the next Sync
		if ps.copying {
			ps.copying = false
			ps.clearCopy()
		}
		ps.failed = true
	case msgCopyInResponse, msgCopyBothResponse:
		ps.copying = true
	}
	return skip
}

// psReady notes a ReadyForQuery.
func (c *client) psReady(s *server) {
	ps := &s.ps
	if popped, _ := ps.pop(&c.px.ps, msgSync, msgQuery, msgFunctionCall); !popped && ps.failed {
		ps.clearUntil(&c.px.ps, msgSync)
	}
	ps.failed = false
}

// psFakes sends the fake responses now due to the client.
func (c *client) psFakes(s *server) {
	if s.ps.pending() > 0 && s.ps.queue[s.ps.head].act == raFake {
		var b [64]byte
		c.px.loop.send(&c.sk, s.ps.takeFakes(b[:0]))
	}
}

// forgetStmts drops all the client's names.
func (c *client) forgetStmts() {
	if len(c.stmts) == 0 {
		return
	}
	es := make([]*psEntry, 0, len(c.stmts))
	for _, e := range c.stmts {
		es = append(es, e)
	}
	clear(c.stmts)
	c.px.ps.unref(es...)
}
