package pooler

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// auth_type = hba: PgBouncer's auth_hba_file, a subset of PostgreSQL's
// pg_hba.conf. Each line is
//
//	local|host|hostssl|hostnossl  DATABASE  USER  [ADDRESS[/BITS] [MASK]]  METHOD
//
// DATABASE and USER are comma-separated lists of names, "quoted" names,
// all, sameuser (DATABASE only) or @file (names read from a file beside the
// hba file); METHOD is trust, reject, md5, password (plain), scram-sha-256,
// cert or peer. The first line that matches the connection (its kind, TLS,
// address), the database and the user decides; no match rejects ("login
// rejected"), as PgBouncer 1.18's hba_eval. A line that cannot be read is
// skipped and reported with its number, as PgBouncer does.

// Auth types that only the hba file or auth_type names.
const (
	AuthHBA    = "hba"    // per-connection method from auth_hba_file
	AuthCert   = "cert"   // TLS client certificate whose name is the user
	AuthReject = "reject" // an hba line that refuses
)

// hbaRule is one line of an hba file.
type hbaRule struct {
	kind   string // local, host, hostssl, hostnossl
	dbs    hbaNames
	users  hbaNames
	prefix netip.Prefix // host lines
	method string       // trust, reject, md5, plain, scram-sha-256, cert, peer
	line   int
}

// hbaNames is a DATABASE or USER column.
type hbaNames struct {
	all, sameUser bool
	names         map[string]bool
}

func (n hbaNames) match(name, pair string) bool {
	return n.all || (n.sameUser && name == pair) || n.names[name]
}

// hbaMethods maps an hba method to the auth type it asks for.
var hbaMethods = map[string]string{
	"trust": AuthTrust, "reject": AuthReject, "md5": AuthMD5, "password": AuthPlain,
	"scram-sha-256": AuthSCRAM, "cert": AuthCert, "peer": AuthPeer,
}

// loadHBA reads an hba file; bad lists the lines skipped, with why.
func loadHBA(path string) (rules []hbaRule, bad []string, err error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("could not open hba config file %s: %w", path, err)
	}
	for i, line := range strings.Split(string(data), "\n") {
		r, err := parseHBALine(path, line)
		if err != nil {
			bad = append(bad, fmt.Sprintf("could not parse hba config line %d of %s: %v", i+1, path, err))
			continue
		}
		if r != nil {
			r.line = i + 1
			rules = append(rules, *r)
		}
	}
	return rules, bad, nil
}

// hbaFields splits a line into fields: whitespace separates, "..."
// quotes, # starts a comment. Commas stay inside a field.
func hbaFields(line string) ([]string, error) {
	var out []string
	var b strings.Builder
	in, started := false, false
	flush := func() {
		if started {
			out = append(out, b.String())
		}
		b.Reset()
		started = false
	}
	for i := 0; i < len(line); i++ {
		ch := line[i]
		switch {
		case in:
			if ch == '"' {
				in = false
			} else {
				b.WriteByte(ch)
			}
		case ch == '"':
			in, started = true, true
			b.WriteByte(0) // marks a quoted part: never a keyword
		case ch == '#':
			flush()
			return out, nil
		case ch == ' ' || ch == '\t' || ch == '\r':
			flush()
		default:
			b.WriteByte(ch)
			started = true
		}
	}
	if in {
		return nil, fmt.Errorf("unterminated quote")
	}
	flush()
	return out, nil
}

// parseHBALine reads one line; nil for a blank or comment line.
func parseHBALine(path, line string) (*hbaRule, error) {
	f, err := hbaFields(line)
	if err != nil || len(f) == 0 {
		return nil, err
	}
	r := &hbaRule{kind: f[0]}
	switch r.kind {
	case "local", "host", "hostssl", "hostnossl":
	default:
		return nil, fmt.Errorf("unknown type %q: want local, host, hostssl or hostnossl", f[0])
	}
	want := 4
	if r.kind != "local" {
		want = 5
	}
	if len(f) < want {
		return nil, fmt.Errorf("want %d fields, got %d", want, len(f))
	}
	if r.dbs, err = parseHBANames(path, f[1], true); err != nil {
		return nil, fmt.Errorf("database: %w", err)
	}
	if r.users, err = parseHBANames(path, f[2], false); err != nil {
		return nil, fmt.Errorf("user: %w", err)
	}
	rest := f[3:]
	if r.kind != "local" {
		addr := rest[0]
		rest = rest[1:]
		if strings.Contains(addr, "/") {
			if r.prefix, err = netip.ParsePrefix(addr); err != nil {
				return nil, fmt.Errorf("address %q: %w", addr, err)
			}
		} else {
			ip, err := netip.ParseAddr(addr)
			if err != nil {
				return nil, fmt.Errorf("address %q: %w", addr, err)
			}
			if len(rest) == 0 {
				return nil, fmt.Errorf("address %q: no mask", addr)
			}
			mask, err := netip.ParseAddr(rest[0])
			if err != nil || mask.BitLen() != ip.BitLen() {
				return nil, fmt.Errorf("mask %q: not a mask for %s", rest[0], addr)
			}
			bits := 0
			for _, by := range mask.AsSlice() {
				for by&0x80 != 0 {
					bits++
					by <<= 1
				}
			}
			r.prefix = netip.PrefixFrom(ip, bits)
			rest = rest[1:]
		}
		r.prefix = r.prefix.Masked()
	}
	if len(rest) != 1 {
		return nil, fmt.Errorf("want one method after the address, got %q", strings.Join(rest, " "))
	}
	m, ok := hbaMethods[rest[0]]
	if !ok {
		return nil, fmt.Errorf("unsupported method %q: want trust, reject, md5, password, scram-sha-256, cert or peer", rest[0])
	}
	r.method = m
	return r, nil
}

// parseHBANames reads a DATABASE or USER column.
func parseHBANames(path, field string, isDB bool) (hbaNames, error) {
	var n hbaNames
	for _, tok := range strings.Split(field, ",") {
		quoted := strings.HasPrefix(tok, "\x00")
		tok = strings.ReplaceAll(tok, "\x00", "")
		switch {
		case tok == "":
			return n, fmt.Errorf("empty name in %q", strings.ReplaceAll(field, "\x00", ""))
		case !quoted && tok == "all":
			n.all = true
		case !quoted && isDB && tok == "sameuser":
			n.sameUser = true
		case !quoted && isDB && (tok == "samerole" || tok == "samegroup" || tok == "replication"):
			return n, fmt.Errorf("%s is not supported", tok)
		case !quoted && strings.HasPrefix(tok, "+"):
			return n, fmt.Errorf("group names (%s) are not supported", tok)
		case !quoted && strings.HasPrefix(tok, "@"):
			fn := tok[1:]
			if !filepath.IsAbs(fn) {
				fn = filepath.Join(filepath.Dir(path), fn)
			}
			data, err := os.ReadFile(fn)
			if err != nil {
				return n, err
			}
			for _, name := range strings.Fields(strings.ReplaceAll(string(data), ",", " ")) {
				if n.names == nil {
					n.names = map[string]bool{}
				}
				n.names[name] = true
			}
		default:
			if n.names == nil {
				n.names = map[string]bool{}
			}
			n.names[tok] = true
		}
	}
	return n, nil
}

// hbaMethod is the auth type the first matching rule asks for (AuthReject
// when none matches). remote is invalid for a Unix-socket client.
func hbaMethod(rules []hbaRule, remote netip.AddrPort, tls bool, db, user string) string {
	unix := !remote.IsValid()
	ip := remote.Addr().Unmap()
	for _, r := range rules {
		switch {
		case unix:
			if r.kind != "local" {
				continue
			}
		case r.kind == "local":
			continue
		case r.kind == "hostssl" && !tls, r.kind == "hostnossl" && tls:
			continue
		case !r.prefix.Contains(ip):
			continue
		}
		if !r.dbs.match(db, user) || !r.users.match(user, db) {
			continue
		}
		return r.method
	}
	return AuthReject
}

// loadAuthHBA reads cfg's auth_hba_file when auth_type is hba, logging the
// lines it skips.
func (p *Proxy) loadAuthHBA(cfg *Config) ([]hbaRule, error) {
	if cfg.AuthType != AuthHBA {
		return nil, nil
	}
	rules, bad, err := loadHBA(cfg.AuthHBAFile)
	if err != nil {
		return nil, fmt.Errorf("auth_hba_file: %w", err)
	}
	for _, b := range bad {
		if cfg.Logf != nil {
			cfg.Logf("%s", b)
		}
	}
	return rules, nil
}

// certLogin checks a cert login (PgBouncer's login_via_cert): a TLS
// connection whose client certificate names the user (its common name or
// a DNS name).
func (p *Proxy) certLogin(c *client, u loginUser) error {
	failed := errors.New("certificate authentication failed")
	tc, ok := c.lg.conn.(*tls.Conn)
	if !ok {
		p.clientLogf(c, "TLS connection required")
		return failed
	}
	certs := tc.ConnectionState().PeerCertificates
	if len(certs) == 0 {
		p.clientLogf(c, "TLS client certificate required")
		return failed
	}
	if !u.found {
		return failed
	}
	if certs[0].Subject.CommonName != u.name && !slices.Contains(certs[0].DNSNames, u.name) {
		p.clientLogf(c, "TLS certificate name mismatch")
		return failed
	}
	return nil
}
