package pooler

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/poolsim/poolsim/models/poolconf"
)

// Server TLS as PgBouncer 1.18 has it (src/sbuf.c setup_tls and
// sbuf_tls_connect, src/server.c handle_sslchar): server_tls_sslmode says
// how the proxy's connections to PostgreSQL are encrypted.
//
//   - disable: plain TCP.
//   - allow, prefer: an SSLRequest first; TLS if the server accepts it,
//     plain TCP if it declines. The certificate is not checked.
//   - require: TLS or no connection ("server refused SSL"); the
//     certificate is not checked.
//   - verify-ca: as require, and the server's certificate must chain to
//     server_tls_ca_file (else the system's CAs).
//   - verify-full: as verify-ca, and the certificate must name the host
//     the database entry connects to.
//
// A failed check is logged with PgBouncer's words ("TLS handshake error:
// certificate verify failed") and counts as a server login that got no
// answer: the clients keep waiting for the next attempt. A Unix socket is
// never encrypted. server_tls_cert_file and server_tls_key_file give the
// proxy a client certificate (PostgreSQL's cert authentication).
//
// Changing any server_tls_* setting (SET, RELOAD) marks every pool's
// servers to close when next released (idle ones at once), as PgBouncer
// tags its pools dirty: new server connections use the new settings. An
// Upstream connection string that names its own sslmode keeps it.

// serverTLS is the server TLS settings put together: mode and the TLS
// client settings (nil for disable).
type serverTLS struct {
	mode  string
	base  *tls.Config
	roots *x509.CertPool // server_tls_ca_file; nil = the system's
}

// verify checks a server's certificate: its chain up to roots and, when
// host is not "", that it names host - in its subject alternative names,
// or in its Common Name when it has none (as libtls and libpq do).
func (st *serverTLS) verify(cs tls.ConnectionState, host string) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("certificate verify failed: the server sent no certificate")
	}
	leaf := cs.PeerCertificates[0]
	inter := x509.NewCertPool()
	for _, ic := range cs.PeerCertificates[1:] {
		inter.AddCert(ic)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: st.roots, Intermediates: inter}); err != nil {
		return &tls.CertificateVerificationError{UnverifiedCertificates: cs.PeerCertificates, Err: err}
	}
	if host == "" {
		return nil
	}
	if len(leaf.DNSNames) == 0 && len(leaf.IPAddresses) == 0 && len(leaf.URIs) == 0 && len(leaf.EmailAddresses) == 0 {
		if strings.EqualFold(leaf.Subject.CommonName, host) {
			return nil
		}
		return &tls.CertificateVerificationError{UnverifiedCertificates: cs.PeerCertificates,
			Err: x509.HostnameError{Certificate: leaf, Host: host}}
	}
	if err := leaf.VerifyHostname(host); err != nil {
		return &tls.CertificateVerificationError{UnverifiedCertificates: cs.PeerCertificates, Err: err}
	}
	return nil
}

// serverTLSMode is ServerTLSSSLMode, "" when not given.
func (c *Config) serverTLSMode() string { return c.ServerTLSSSLMode }

// serverTLSKey is the server TLS settings as one string. With TLS off
// the files and ciphers do not matter: changing them changes nothing
// (PgBouncer recycles servers only when its old or new settings use TLS).
func (c *Config) serverTLSKey() string {
	if c.ServerTLSSSLMode == "" || c.ServerTLSSSLMode == SSLDisable {
		return c.ServerTLSSSLMode
	}
	return strings.Join([]string{c.ServerTLSSSLMode, c.ServerTLSCAFile, c.ServerTLSCertFile, c.ServerTLSKeyFile,
		c.ServerTLSProtocols, c.ServerTLSCiphers}, "\x00")
}

// serverTLSConfig checks the server TLS settings and reads their files;
// nil when ServerTLSSSLMode is "" (not given).
func (c *Config) serverTLSConfig() (*serverTLS, error) {
	mode := c.serverTLSMode()
	if mode == "" {
		return nil, nil
	}
	if !slices.Contains(poolconf.SSLModes, mode) {
		return nil, fmt.Errorf("server_tls_sslmode: %q: want one of %s", mode, strings.Join(poolconf.SSLModes, ", "))
	}
	st := &serverTLS{mode: mode}
	if mode == SSLDisable {
		return st, nil
	}
	tc := &tls.Config{}
	var err error
	if tc.MinVersion, tc.MaxVersion, err = tlsProtocols(c.ServerTLSProtocols); err != nil {
		return nil, fmt.Errorf("server_tls_protocols: %w", err)
	}
	if tc.CipherSuites, err = tlsCiphers(c.ServerTLSCiphers); err != nil {
		return nil, fmt.Errorf("server_tls_ciphers: %w", err)
	}
	// A certificate needs both files; one alone is taken as none yet,
	// since the console sets them one SET at a time (as PgBouncer does).
	if c.ServerTLSCertFile != "" && c.ServerTLSKeyFile != "" {
		cert, err := tls.LoadX509KeyPair(c.ServerTLSCertFile, c.ServerTLSKeyFile)
		if err != nil {
			return nil, fmt.Errorf("server_tls_cert_file/server_tls_key_file: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	if c.ServerTLSCAFile != "" {
		pool, err := loadCAFile("server_tls_ca_file", c.ServerTLSCAFile)
		if err != nil {
			return nil, err
		}
		tc.RootCAs = pool
	}
	switch mode {
	case SSLVerifyCA, SSLVerifyFull:
		// The chain is checked here; verify-full's host name in apply,
		// per host. Go's own check would refuse a certificate that names
		// its host in the Common Name only, which libtls (PgBouncer) and
		// libpq accept.
		tc.InsecureSkipVerify = true
		st.roots = tc.RootCAs
		tc.VerifyConnection = func(cs tls.ConnectionState) error { return st.verify(cs, "") }
	default: // allow, prefer, require: encrypted, not checked (libtls' noverifycert)
		tc.InsecureSkipVerify = true
	}
	st.base = tc
	return st, nil
}

// apply sets conf's TLS as st says, for its host and every fallback host
// (a host list): prefer and allow try TLS, then plain TCP, on each host.
func (st *serverTLS) apply(conf *pgconn.Config) {
	type hostPort struct {
		host string
		port uint16
	}
	hosts := []hostPort{{conf.Host, conf.Port}}
	for _, fb := range conf.Fallbacks {
		if h := (hostPort{fb.Host, fb.Port}); !slices.Contains(hosts, h) {
			hosts = append(hosts, h)
		}
	}
	var all []*pgconn.FallbackConfig
	for _, h := range hosts {
		if st.base == nil || strings.HasPrefix(h.host, "/") {
			all = append(all, &pgconn.FallbackConfig{Host: h.host, Port: h.port})
			continue
		}
		tc := st.base.Clone()
		if st.mode == SSLVerifyFull {
			host := h.host
			tc.ServerName = host // SNI
			tc.VerifyConnection = func(cs tls.ConnectionState) error { return st.verify(cs, host) }
		}
		all = append(all, &pgconn.FallbackConfig{Host: h.host, Port: h.port, TLSConfig: tc})
		if st.mode == SSLAllow || st.mode == SSLPrefer {
			all = append(all, &pgconn.FallbackConfig{Host: h.host, Port: h.port})
		}
	}
	conf.Host, conf.Port, conf.TLSConfig = all[0].Host, all[0].Port, all[0].TLSConfig
	conf.Fallbacks = all[1:]
}

// tlsProtocols reads PgBouncer's (libtls') protocol list: secure (or
// default: TLS 1.2 and 1.3), all, legacy, or tlsv1.0 ... tlsv1.3,
// separated by commas or colons, each optionally prefixed with ! or - to
// leave it out. Go offers a range of versions: the lowest and highest
// named.
func tlsProtocols(s string) (minV, maxV uint16, err error) {
	versions := map[string]uint16{"tlsv1.0": tls.VersionTLS10, "tlsv1.1": tls.VersionTLS11, "tlsv1.2": tls.VersionTLS12, "tlsv1.3": tls.VersionTLS13}
	on := map[uint16]bool{}
	if strings.TrimSpace(s) == "" {
		s = "secure"
	}
	for _, f := range strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return r == ',' || r == ':' || r == ' ' }) {
		neg := strings.HasPrefix(f, "!") || strings.HasPrefix(f, "-")
		f = strings.TrimLeft(f, "!-+")
		var set []uint16
		switch f {
		case "secure", "default":
			set = []uint16{tls.VersionTLS12, tls.VersionTLS13}
		case "all", "legacy":
			set = []uint16{tls.VersionTLS10, tls.VersionTLS11, tls.VersionTLS12, tls.VersionTLS13}
		default:
			v, ok := versions[f]
			if !ok {
				return 0, 0, fmt.Errorf("%q: want secure, default, all, legacy or tlsv1.0 to tlsv1.3", f)
			}
			set = []uint16{v}
		}
		for _, v := range set {
			on[v] = !neg
		}
	}
	for _, v := range []uint16{tls.VersionTLS10, tls.VersionTLS11, tls.VersionTLS12, tls.VersionTLS13} {
		if on[v] {
			if minV == 0 {
				minV = v
			}
			maxV = v
		}
	}
	if minV == 0 {
		return 0, 0, fmt.Errorf("%q leaves no TLS version", s)
	}
	return minV, maxV, nil
}

// tlsCiphers reads server_tls_ciphers: PgBouncer's keywords (fast, normal,
// secure, default: Go's own choice of secure suites; compat, legacy,
// insecure, all: Go's suites and its insecure ones) or a list of suite
// names as Go names them (TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256),
// separated by colons or commas. TLS 1.3's suites are not configurable in
// Go; nil keeps Go's defaults.
func tlsCiphers(s string) ([]uint16, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "fast", "normal", "secure", "default":
		return nil, nil
	case "compat", "legacy", "insecure", "all":
		var ids []uint16
		for _, cs := range tls.CipherSuites() {
			ids = append(ids, cs.ID)
		}
		for _, cs := range tls.InsecureCipherSuites() {
			ids = append(ids, cs.ID)
		}
		return ids, nil
	}
	byName := map[string]uint16{}
	for _, cs := range append(tls.CipherSuites(), tls.InsecureCipherSuites()...) {
		byName[cs.Name] = cs.ID
	}
	var ids []uint16
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ':' || r == ',' || r == ' ' }) {
		id, ok := byName[strings.ToUpper(f)]
		if !ok {
			return nil, fmt.Errorf("%q: want fast, normal, secure, compat, legacy, all or cipher suite names such as TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", f)
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// tlsText is SHOW CLIENTS' and SHOW SERVERS' tls cell: PgBouncer's
// "TLSv1.3/<cipher>", "" for plain TCP.
func tlsText(version, suite uint16) string {
	if version == 0 {
		return ""
	}
	v := strings.Replace(tls.VersionName(version), "TLS 1.", "TLSv1.", 1)
	return v + "/" + tls.CipherSuiteName(suite)
}

// isCertVerifyError reports whether err is a server certificate that
// failed its check.
func isCertVerifyError(err error) bool {
	var cve *tls.CertificateVerificationError
	var ua x509.UnknownAuthorityError
	var he x509.HostnameError
	var ci x509.CertificateInvalidError
	return errors.As(err, &cve) || errors.As(err, &ua) || errors.As(err, &he) || errors.As(err, &ci)
}
