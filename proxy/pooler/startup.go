package pooler

import (
	"regexp"
	"slices"
	"strings"
)

// Startup parameters beyond the five tracked ones (varcache.go): whatever
// else a client puts in its StartupMessage (asyncpg's server_settings,
// pgjdbc's search_path) or in its "options" parameter as "-c name=value"
// (libpq's PGOPTIONS, psycopg's and node-postgres's options) is a run-time
// setting the client expects its session to have. PgBouncer 1.18 refuses
// them ("unsupported startup parameter: options"); the proxy applies them:
// each client keeps its list, each server remembers the list last applied
// to it, and when a client is linked to a server whose list differs, the
// proxy sends set_config for each of the client's settings and RESET for
// each setting the server has and the client has not, before the client's
// first message, swallowing the replies (client.link). A setting
// PostgreSQL rejects (unknown name, bad value, one that cannot change after
// connection start) fails the client's login with PostgreSQL's own error as
// a FATAL: the settings are tried on a server before the login completes
// (startup_check.go). Names listed in ignore_startup_parameters are
// dropped, as in PgBouncer.

// setting is one run-time parameter a client asked for at login.
type setting struct{ name, value string }

// settings is a client's extra startup settings, sorted by name, names in
// lower case. A client's list never changes after login, so a server can
// share it.
type settings []setting

// startupRefusal is the FATAL text of a startup parameter that cannot be
// applied.
type startupRefusal string

// settingName is what the proxy accepts as a run-time parameter name: an
// identifier, or two joined by a dot (a custom placeholder such as
// myapp.tenant).
var settingName = regexp.MustCompile(`^[a-z_][a-z0-9_$]*(\.[a-z_][a-z0-9_$]*)?$`)

// parseStartup splits a StartupMessage's parameters into the tracked
// settings (want, "" where not given), the other settings to apply and,
// when one cannot be applied, the FATAL text to refuse the client with.
// ignore lists ignore_startup_parameters (lower case).
func parseStartup(params map[string]string, ignore []string) (want vars, extra settings, refuse startupRefusal) {
	add := func(name, value string) startupRefusal {
		lname := strings.ToLower(name)
		if slices.Contains(ignore, lname) {
			return ""
		}
		if i := trackedIndex(name); i >= 0 {
			want[i] = value
			return ""
		}
		if !settingName.MatchString(lname) {
			return startupRefusal("unsupported startup parameter: " + name)
		}
		if i := slices.IndexFunc(extra, func(s setting) bool { return s.name == lname }); i >= 0 {
			extra[i].value = value // a later one wins, as in PostgreSQL
			return ""
		}
		extra = append(extra, setting{lname, value})
		return ""
	}
	names := make([]string, 0, len(params))
	for k := range params {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		v := params[k]
		switch lk := strings.ToLower(k); {
		case lk == "user" || lk == "database" || strings.HasPrefix(lk, "_pq_."):
			// The login itself, and protocol options (declined with
			// NegotiateProtocolVersion).
		case slices.Contains(ignore, lk):
		case lk == "replication":
			return want, nil, "unsupported startup parameter: replication"
		case lk == "options":
			pairs, bad := splitOptions(v)
			if bad != "" {
				return want, nil, startupRefusal("unsupported startup parameter: options (" + bad + "): only -c name=value and --name=value are supported")
			}
			for _, p := range pairs {
				if r := add(p.name, p.value); r != "" {
					return want, nil, r
				}
			}
		default:
			if r := add(k, v); r != "" {
				return want, nil, r
			}
		}
	}
	slices.SortFunc(extra, func(a, b setting) int { return strings.Compare(a.name, b.name) })
	return want, extra, ""
}

// splitOptions reads a startup "options" value as PostgreSQL does
// (pg_split_opts: words split at white space, a backslash takes the next
// character literally) and returns its "-c name=value", "-cname=value" and
// "--name=value" switches; dashes in names become underscores, as in
// PostgreSQL's ParseLongOption. Any other switch is returned in bad.
func splitOptions(s string) (out []setting, bad string) {
	var words []string
	var w strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r' || ch == '\f' || ch == '\v':
			if inWord {
				words = append(words, w.String())
				w.Reset()
				inWord = false
			}
			continue
		case ch == '\\' && i+1 < len(s):
			i++
			ch = s[i]
		}
		w.WriteByte(ch)
		inWord = true
	}
	if inWord {
		words = append(words, w.String())
	}
	for i := 0; i < len(words); i++ {
		var nv string
		switch word := words[i]; {
		case word == "-c":
			if i+1 == len(words) {
				return nil, word
			}
			i++
			nv = words[i]
		case strings.HasPrefix(word, "-c"):
			nv = word[2:]
		case strings.HasPrefix(word, "--") && len(word) > 2:
			nv = word[2:]
		default:
			return nil, word
		}
		name, value, ok := strings.Cut(nv, "=")
		if !ok || name == "" {
			return nil, words[i]
		}
		out = append(out, setting{strings.ReplaceAll(name, "-", "_"), value})
	}
	return out, ""
}

// sameSettings reports whether two lists are equal; lists a server took
// from a client share their array, so that case costs one comparison.
func sameSettings(a, b settings) bool {
	if len(a) != len(b) {
		return false
	}
	if len(a) == 0 || &a[0] == &b[0] {
		return true
	}
	return slices.Equal(a, b)
}

// applySettings appends to sql the statements that turn a server's extra
// settings have into want: RESET for what want lacks, one set_config call
// for each of want's (set_config takes the value as the startup packet
// does, so a list such as search_path=a,b stays a list).
func applySettings(sql *strings.Builder, want, have settings) {
	for _, h := range have {
		if !slices.ContainsFunc(want, func(s setting) bool { return s.name == h.name }) {
			sql.WriteString("RESET ")
			sql.WriteString(h.name)
			sql.WriteString(";")
		}
	}
	if len(want) == 0 {
		return
	}
	sql.WriteString("SELECT ")
	for i, s := range want {
		if i > 0 {
			sql.WriteString(", ")
		}
		sql.WriteString("pg_catalog.set_config(")
		sql.WriteString(sqlLiteral(s.name))
		sql.WriteString(", ")
		sql.WriteString(sqlLiteral(s.value))
		sql.WriteString(", false)")
	}
	sql.WriteString(";")
}

// sqlLiteral quotes s as an SQL string constant that reads the same
// whatever standard_conforming_strings is.
func sqlLiteral(s string) string {
	q := strings.ReplaceAll(s, "'", "''")
	if strings.Contains(s, `\`) {
		return "E'" + strings.ReplaceAll(q, `\`, `\\`) + "'"
	}
	return "'" + q + "'"
}
