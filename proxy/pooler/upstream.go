package pooler

import (
	"net/url"
	"os"
	"sort"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// The upstream connection string is parsed by pgconn, which, like libpq,
// fills what the string leaves out from PG* environment variables. Four of
// them would silently change every server connection, so the proxy never
// takes them from the environment, only from Upstream itself:
//
//	PGCONNECT_TIMEOUT  the server login is bounded by server_connect_timeout alone
//	PGOPTIONS          run-time settings of every server session
//	PGTZ               TimeZone of every server session
//	PGAPPNAME          application_name (each client's own follows it)
//
// The others apply as in libpq when Upstream does not set the keyword:
// UpstreamEnvApplied lists them. PGDATABASE and PGUSER do not matter: the
// database and user come from each client.

// ignoredEnv maps the environment variables the proxy ignores to their
// connection-string keywords.
var ignoredEnv = map[string]string{
	"PGCONNECT_TIMEOUT": "connect_timeout",
	"PGOPTIONS":         "options",
	"PGTZ":              "timezone",
	"PGAPPNAME":         "application_name",
}

// appliedEnv are the variables pgconn reads that the proxy lets apply,
// with their keywords.
var appliedEnv = map[string]string{
	"PGHOST": "host", "PGPORT": "port", "PGPASSWORD": "password", "PGPASSFILE": "passfile",
	"PGSSLMODE": "sslmode", "PGSSLKEY": "sslkey", "PGSSLCERT": "sslcert", "PGSSLCERTMODE": "sslcertmode",
	"PGSSLSNI": "sslsni", "PGSSLROOTCERT": "sslrootcert", "PGSSLPASSWORD": "sslpassword",
	"PGSSLNEGOTIATION": "sslnegotiation", "PGTARGETSESSIONATTRS": "target_session_attrs",
	"PGSERVICE": "service", "PGSERVICEFILE": "servicefile", "PGMINPROTOCOLVERSION": "min_protocol_version",
	"PGMAXPROTOCOLVERSION": "max_protocol_version", "PGCHANNELBINDING": "channel_binding",
	"PGREQUIREAUTH": "require_auth",
}

// UpstreamEnvApplied lists the PG* environment variables that are set and
// shape the upstream connection because upstream does not set their
// keyword, e.g. "PGPASSWORD" (for the proxy's start-up log).
func UpstreamEnvApplied(upstream string) []string {
	explicit := connKeywords(upstream)
	var out []string
	for env, kw := range appliedEnv {
		if os.Getenv(env) != "" && !explicit[kw] {
			out = append(out, env)
		}
	}
	sort.Strings(out)
	return out
}

// parseUpstream parses the upstream connection string with pgconn and
// undoes what the ignored environment variables set.
func parseUpstream(s string) (*pgconn.Config, error) {
	conf, err := pgconn.ParseConfig(s)
	if err != nil {
		return nil, err
	}
	explicit := connKeywords(s)
	for env, kw := range ignoredEnv {
		if os.Getenv(env) == "" || explicit[kw] {
			continue
		}
		switch kw {
		case "connect_timeout":
			conf.ConnectTimeout = 0
		default:
			delete(conf.RuntimeParams, kw)
		}
	}
	return conf, nil
}

// connKeywords returns the keywords a connection string sets: a URL's
// host, port, user, password, dbname and query parameters, or the keys of
// a keyword=value string. It only looks at the keys: pgconn has checked
// the string.
func connKeywords(s string) map[string]bool {
	kw := map[string]bool{}
	if strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://") {
		u, err := url.Parse(s)
		if err != nil {
			return kw
		}
		if u.Host != "" {
			kw["host"] = true
			if strings.Contains(u.Host, ":") && !strings.HasSuffix(u.Host, "]") {
				kw["port"] = true
			}
		}
		if u.User != nil {
			kw["user"] = u.User.Username() != ""
			if _, ok := u.User.Password(); ok {
				kw["password"] = true
			}
		}
		if strings.TrimPrefix(u.Path, "/") != "" {
			kw["dbname"] = true
		}
		for k := range u.Query() {
			kw[k] = true
		}
		return kw
	}
	// keyword = value pairs; values may be 'quoted' with \ escapes.
	for i := 0; i < len(s); {
		for i < len(s) && isSpace(s[i]) {
			i++
		}
		start := i
		for i < len(s) && s[i] != '=' && !isSpace(s[i]) {
			i++
		}
		key := s[start:i]
		for i < len(s) && isSpace(s[i]) {
			i++
		}
		if i >= len(s) || s[i] != '=' {
			break
		}
		i++
		for i < len(s) && isSpace(s[i]) {
			i++
		}
		if i < len(s) && s[i] == '\'' {
			for i++; i < len(s) && s[i] != '\''; i++ {
				if s[i] == '\\' {
					i++
				}
			}
			i++
		} else {
			for i < len(s) && !isSpace(s[i]) {
				if s[i] == '\\' {
					i++
				}
				i++
			}
		}
		if key != "" {
			kw[key] = true
		}
	}
	return kw
}

func isSpace(b byte) bool {
	return b == ' ' || b == '\t' || b == '\n' || b == '\r' || b == '\f' || b == '\v'
}
