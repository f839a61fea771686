package pooler

import (
	"bytes"
	"strings"

	"github.com/jackc/pgx/v5/pgproto3"
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

// get returns the value of a tracked setting (any case).
func (v *vars) get(name string) string {
	if i := trackedIndex(name); i >= 0 {
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

// setQuery appends to b a Query message that SETs on a server with values
// have the client's values want, and reports whether one was needed.
func setQuery(b []byte, want, have *vars) ([]byte, bool) {
	var sql bytes.Buffer
	for i, w := range want {
		if w == "" {
			continue
		}
		if w == have[i] {
			want[i] = have[i] // one string: the next comparison is a pointer's
			continue
		}
		sql.WriteString("SET ")
		sql.WriteString(trackedParams[i])
		sql.WriteString("='")
		sql.WriteString(strings.ReplaceAll(w, "'", "''"))
		sql.WriteString("';")
	}
	if sql.Len() == 0 {
		return b, false
	}
	b, _ = (&pgproto3.Query{String: sql.String()}).Encode(b)
	return b, true
}

// welcomeFor is the pool's ParameterStatus messages with the client's own
// values in place of the server's for the tracked settings it asked for.
func welcomeFor(params map[string]string, want *vars) []byte {
	own := make(map[string]string, len(params)+len(trackedParams))
	for k, v := range params {
		own[k] = v
	}
	for i, w := range want {
		if w == "" {
			continue
		}
		for k := range own { // the server's spelling of the name
			if strings.EqualFold(k, trackedParams[i]) {
				delete(own, k)
			}
		}
		own[trackedParams[i]] = w
	}
	return encodeWelcome(own)
}
