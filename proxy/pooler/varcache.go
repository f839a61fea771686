package pooler

import (
	"reflect"
	"strings"
)

// Startup parameters, tracked as PgBouncer's varcache does (src/varcache.c):
// each client keeps the values of five session settings it asked for (in
// its StartupMessage, or later with SET, which the server reports in a
// ParameterStatus), each server keeps the values it has; when a client is
// linked to a server whose values differ, the proxy first sends the server
// a SET for each and swallows the replies. So a client sees its own
// application_name, TimeZone or client_encoding on whichever server its
// transaction lands on.

// trackedParams are the tracked settings, with the names PostgreSQL
// reports them under.
var trackedParams = [...]string{"client_encoding", "DateStyle", "TimeZone", "standard_conforming_strings", "application_name"}

// vars holds one value per tracked setting; "" is unknown or not asked for.
type vars [len(trackedParams)]string

// get returns the value of a tracked setting (any case); "" from a nil
// set.
func (v *vars) get(name string) string {
	if i := trackedIndex(name); v != nil && i >= 0 {
		return v[i]
	}
	return ""
}

// trackedIndex returns the index of a setting name (any case) in
// trackedParams, or -1.
func trackedIndex(name string) int {
	for i, p := range trackedParams {
		if strings.EqualFold(p, name) {
			return i
		}
	}
	return -1
}

// varsFrom picks the tracked settings out of name/value pairs (a
// StartupMessage's parameters or a server's ParameterStatus set).
func varsFrom(params map[string]string) (v vars) {
	for name, value := range params {
		if i := trackedIndex(name); i >= 0 {
			v[i] = value
		}
	}
	return v
}

// interned returns the one copy of a tracked setting's value the proxy
// keeps: equal values are then one string, and comparing them on every
// link compares two pointers. It runs on the loop.
func (px *Proxy) interned(b []byte) string {
	if s, ok := px.values[string(b)]; ok {
		return s
	}
	if px.values == nil || len(px.values) > 1024 { // bounded: clients choose values
		px.values = map[string]string{}
	}
	s := string(b)
	px.values[s] = s
	return s
}

// internAll makes v's values the interned copies.
func (px *Proxy) internAll(v *vars) {
	for i := range v {
		v[i] = px.interned([]byte(v[i]))
	}
}

// noteParameterStatus records a ParameterStatus message body (name, value)
// in v if the setting is tracked.
func (v *vars) noteParameterStatus(px *Proxy, body []byte) {
	name, rest, ok := cstring(body)
	if !ok {
		return
	}
	value, _, ok := cstring(rest)
	if !ok {
		return
	}
	if i := trackedIndex(string(name)); i >= 0 {
		v[i] = px.interned(value)
	}
}

// setTracked appends to sql a SET for each tracked setting whose value on
// a server with values have differs from the client's want (nil: none).
// Both hold interned values, so an equal pair is one string and its
// comparison a pointer's.
func setTracked(sql *strings.Builder, want, have *vars) {
	if want == nil {
		return
	}
	for i, w := range want {
		if w == "" || w == have[i] {
			continue
		}
		sql.WriteString("SET ")
		sql.WriteString(trackedParams[i])
		sql.WriteString("=")
		sql.WriteString(sqlLiteral(w))
		sql.WriteString(";")
	}
}

// welcomeFor is the pool's ParameterStatus messages with the client's own
// values in place of the server's for the tracked settings it asked for,
// and for the extra settings the server reports (such as IntervalStyle).
func welcomeFor(params map[string]string, want *vars, extra settings) []byte {
	own := make(map[string]string, len(params)+len(trackedParams))
	for k, v := range params {
		own[k] = v
	}
	put := func(name, value string) {
		for k := range own { // the server's spelling of the name
			if strings.EqualFold(k, name) {
				delete(own, k)
				own[k] = value
				return
			}
		}
		own[name] = value
	}
	for i, w := range want {
		if w != "" {
			put(trackedParams[i], w)
		}
	}
	for _, s := range extra {
		for k := range own {
			if strings.EqualFold(k, s.name) {
				own[k] = s.value
				break
			}
		}
	}
	return encodeWelcome(own)
}

// maxVarSets bounds the proxy's interned sets of tracked settings
// (clients choose them): past it the memory starts again, and the sets
// handed out stay valid.
const maxVarSets = 1024

// internVars returns the proxy's one copy of the tracked settings v
// (nil: none asked for), with interned values: clients with the same
// settings share it, so an idle client carries a pointer, not five
// strings. The copy is never changed; a client whose settings change gets
// another (noteParameterStatus). It runs on the loop.
func (px *Proxy) internVars(v *vars) *vars {
	if v == nil {
		v = &vars{}
	}
	if p, ok := px.varSets[*v]; ok {
		return p
	}
	if px.varSets == nil || len(px.varSets) >= maxVarSets {
		px.varSets = map[vars]*vars{}
	}
	p := new(vars) // only here: a hit allocates nothing
	*p = *v
	px.internAll(p)
	px.varSets[*p] = p
	return p
}

// noteParameterStatus records a ParameterStatus message body (name,
// value) the server sent while linked to the client in the client's
// tracked settings, if the setting is tracked and its value changed.
func (c *client) noteParameterStatus(body []byte) {
	var v vars
	if c.want != nil {
		v = *c.want
	}
	v.noteParameterStatus(c.px, body)
	if c.want == nil || v != *c.want {
		c.want = c.px.internVars(&v)
	}
}

// welcomeCache is a pool's ParameterStatus set (params) encoded once, for
// the logins of clients whose settings change none of it: most clients,
// whose login then builds no map and encodes no message for it.
type welcomeCache struct {
	params map[string]string
	b      []byte
}

// welcomeFor is welcomeFor(params, want, extra), from the pool's cache
// when the client's settings change nothing in params. It runs on the
// login goroutines; the cache is rebuilt when params is another map than
// the one it was made from (the pool's welcome was dropped and taken
// again).
func (p *pool) welcomeFor(params map[string]string, want *vars, extra settings) []byte {
	for i, w := range want {
		if w != params[trackedParams[i]] {
			return welcomeFor(params, want, extra)
		}
	}
	for _, s := range extra {
		for k := range params {
			if strings.EqualFold(k, s.name) {
				return welcomeFor(params, want, extra)
			}
		}
	}
	if w := p.welcome.Load(); w != nil && reflect.ValueOf(w.params).UnsafePointer() == reflect.ValueOf(params).UnsafePointer() {
		return w.b
	}
	w := &welcomeCache{params: params, b: encodeWelcome(params)}
	p.welcome.Store(w)
	return w.b
}
