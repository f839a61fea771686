package pooler

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/poolsim/poolsim/models/poolconf"
)

// Reload puts new settings in force while the proxy serves, as PgBouncer's
// RELOAD and SIGHUP do: what can change live changes - pool sizes and
// modes, limits, timeouts, auth_type and auth_file (for the next logins), client TLS (its files are read again),
// ignore_startup_parameters, the databases and users; servers of a
// database whose connection settings changed are closed when next released
// (idle ones at once), so no transaction is cut. What cannot change
// while running (the listen address, max_prepared_statements of existing
// pools, ShutdownTimeout's bound of a shutdown already begun) keeps its old
// value and is named in kept. changed names every setting that took a new
// value. A cfg that does not validate changes nothing.
func (p *Proxy) Reload(cfg Config) (changed, kept []string, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, nil, fmt.Errorf("proxy reload: %w", err)
	}
	old := p.conf()
	if cfg.Listen != old.Listen {
		kept = append(kept, fmt.Sprintf("listen_addr/listen_port: %s (changing it needs a restart; new value %s)", old.Listen, cfg.Listen))
		cfg.Listen = old.Listen
	}
	kept = append(kept, keepListeners(old, &cfg)...)
	if cfg.MaxPreparedStatements != old.MaxPreparedStatements {
		kept = append(kept, fmt.Sprintf("max_prepared_statements: %d for existing pools (new pools get %d)", old.MaxPreparedStatements, cfg.MaxPreparedStatements))
	}
	cfg.Observer = old.Observer // set once, at New
	cfg.Logf = old.Logf
	if cfg.Source == nil {
		cfg.Source = old.Source
	}
	changed = configDiff(old, &cfg)
	if err := p.setConfig(&cfg); err != nil {
		return nil, nil, fmt.Errorf("proxy reload: %w", err)
	}
	p.dropRemovedPeers(old.Peers, cfg.Peers) // [peers] (peering.go)
	var errs []string
	if p.running() { // before Serve there is no pool to reconfigure
		p.loop.call(func() {
			for _, pl := range p.loopPools {
				if e := p.reconfigure(pl, &cfg); e != "" {
					errs = append(errs, e)
				}
			}
		})
	}
	kept = append(kept, errs...)
	for _, c := range changed {
		p.logf("reload: %s", c)
	}
	for _, k := range kept {
		p.logf("reload: not applied: %s", k)
	}
	return changed, kept, nil
}

// reconfigure applies cfg to one pool; it runs on the loop and returns
// what it could not apply.
func (p *Proxy) reconfigure(pl *pool, cfg *Config) string {
	user := pl.key.user
	ent, ps, ok := cfg.poolFor(pl.key.db, user)
	if !ok {
		return fmt.Sprintf("database %s: no longer configured; its pool serves the clients it has", pl.key.db)
	}
	if ent.User != "" && ent.User != user {
		return fmt.Sprintf("database %s: forced user changed to %s; the pool for %s serves the clients it has", pl.key.db, ent.User, user)
	}
	if serverEntryChanged(pl.entry, ent) || pl.tlsKey != cfg.serverTLSKey() {
		p.mu.Lock()
		conf, err := p.serverConfig(ent, user)
		p.mu.Unlock()
		if err != nil {
			return err.Error()
		}
		pl.conf, pl.entry, pl.tlsKey = conf, ent, cfg.serverTLSKey()
		// The next clients wait for a server made with the new settings,
		// as PgBouncer drops the pool's welcome (tag_pool_dirty), instead
		// of being refused at once while logins with the old ones fail.
		pl.params = nil
		pl.dirtyGen++ // a login in flight is not used (loggedIn)
		for s := range pl.servers {
			s.closeNeeded = true
		}
		pl.closeIdle(p.loop.now, 0, "database settings changed")
	}
	pl.apply(ps)
	pl.launch()
	return ""
}

// serverEntryChanged reports whether a database entry's server login
// changed.
func serverEntryChanged(a, b poolconf.Database) bool {
	return a.Host != b.Host || a.Port != b.Port || a.DBName != b.DBName || a.User != b.User ||
		a.Password != b.Password || a.ClientEncoding != b.ClientEncoding || a.DateStyle != b.DateStyle || a.TimeZone != b.TimeZone ||
		a.ConnectQuery != b.ConnectQuery
}

// configDiff names each field of Config that differs, with both values
// (passwords and the upstream URL's password not shown).
func configDiff(a, b *Config) []string {
	var out []string
	va, vb := reflect.ValueOf(*a), reflect.ValueOf(*b)
	t := va.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Type.Kind() == reflect.Func || !f.IsExported() {
			continue
		}
		x, y := va.Field(i).Interface(), vb.Field(i).Interface()
		if reflect.DeepEqual(x, y) {
			continue
		}
		switch f.Name {
		case "Upstream":
			out = append(out, fmt.Sprintf("upstream: %s -> %s", redactURL(a.Upstream), redactURL(b.Upstream)))
		case "Databases":
			out = append(out, "databases: "+strings.Join(dbNames(b.Databases), ", "))
		case "Pooling": // by pgbouncer.ini key, as PgBouncer's settings
			for _, key := range poolconf.PoolingKeys() {
				u, _ := a.Pooling.Text(key)
				v, _ := b.Pooling.Text(key)
				if u != v {
					out = append(out, fmt.Sprintf("%s: %s -> %s", key, u, v))
				}
			}
		default:
			out = append(out, fmt.Sprintf("%s: %v -> %v", f.Name, x, y))
		}
	}
	return out
}

func dbNames(ds []poolconf.Database) []string {
	var out []string
	for _, d := range ds {
		out = append(out, d.Name)
	}
	return slices.Compact(out)
}

// redactURL hides a password in a connection string for the log.
func redactURL(s string) string {
	if i := strings.Index(s, "://"); i >= 0 {
		rest := s[i+3:]
		if at := strings.LastIndex(rest, "@"); at >= 0 {
			if colon := strings.Index(rest[:at], ":"); colon >= 0 {
				return s[:i+3] + rest[:colon] + ":xxxxx" + rest[at:]
			}
		}
		return s
	}
	var parts []string
	for _, f := range strings.Fields(s) {
		if strings.HasPrefix(strings.ToLower(f), "password=") {
			f = "password=xxxxx"
		}
		parts = append(parts, f)
	}
	return strings.Join(parts, " ")
}
