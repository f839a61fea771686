package pooler

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/poolsim/poolsim/models/poolconf"
)

// Client TLS as PgBouncer 1.18 has it (src/sbuf.c sbuf_tls_setup,
// src/client.c): client_tls_sslmode says what a client's SSLRequest gets
// and whether a client must use TLS.
//
//   - disable (the default): an SSLRequest is declined ('N'); clients speak
//     plain TCP.
//   - allow, prefer: an SSLRequest is accepted ('S', then the TLS handshake);
//     a client that does not ask for TLS logs in without it. A client
//     certificate is checked against client_tls_ca_file when one is given.
//   - require: as prefer, but a StartupMessage over plain TCP gets FATAL
//     "SSL required".
//   - verify-ca, verify-full: as require, and the client must present a
//     certificate that client_tls_ca_file signed (verify-full needs the
//     file, as in PgBouncer; libtls checks no name on the server side
//     either).
//
// Any mode but disable needs client_tls_cert_file and client_tls_key_file.
// TLS 1.2 and 1.3 are offered (PgBouncer's client_tls_protocols = secure),
// with Go's cipher suites. A TLS client reaches the loop through a socket
// pair (bridge.go), as a TLS server connection does.

// Client TLS modes (client_tls_sslmode), PgBouncer's names.
const (
	SSLDisable    = "disable"
	SSLAllow      = "allow"
	SSLPrefer     = "prefer"
	SSLRequire    = "require"
	SSLVerifyCA   = "verify-ca"
	SSLVerifyFull = "verify-full"
)

// checkClientTLS checks the client TLS settings with PgBouncer's texts.
func (c *Config) checkClientTLS() error {
	mode := c.clientTLSMode()
	if !slices.Contains(poolconf.SSLModes, mode) {
		return fmt.Errorf("client_tls_sslmode: %q: want one of %s", mode, strings.Join(poolconf.SSLModes, ", "))
	}
	if mode == SSLDisable {
		return nil
	}
	if c.ClientTLSKeyFile == "" || c.ClientTLSCertFile == "" {
		return errors.New("client_tls_sslmode: to allow TLS connections from clients, client_tls_key_file and client_tls_cert_file must be set")
	}
	if mode == SSLVerifyFull && c.ClientTLSCAFile == "" {
		return errors.New("client_tls_sslmode: verify-full requires client_tls_ca_file")
	}
	return nil
}

// clientTLSMode is ClientTLSSSLMode with "" read as disable.
func (c *Config) clientTLSMode() string {
	if c.ClientTLSSSLMode == "" {
		return SSLDisable
	}
	return c.ClientTLSSSLMode
}

// requiresTLS reports whether a client must log in over TLS (require,
// verify-ca, verify-full).
func (c *Config) requiresTLS() bool {
	switch c.clientTLSMode() {
	case SSLRequire, SSLVerifyCA, SSLVerifyFull:
		return true
	}
	return false
}

// clientTLSConfig builds the TLS server settings from the files; nil when
// client TLS is off.
func (c *Config) clientTLSConfig() (*tls.Config, error) {
	mode := c.clientTLSMode()
	if mode == SSLDisable {
		return nil, nil
	}
	cert, err := tls.LoadX509KeyPair(c.ClientTLSCertFile, c.ClientTLSKeyFile)
	if err != nil {
		return nil, fmt.Errorf("client_tls_cert_file/client_tls_key_file: %w", err)
	}
	tc := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if c.ClientTLSCAFile != "" {
		if tc.ClientCAs, err = loadCAFile("client_tls_ca_file", c.ClientTLSCAFile); err != nil {
			return nil, err
		}
	}
	switch mode {
	case SSLVerifyCA, SSLVerifyFull:
		tc.ClientAuth = tls.RequireAndVerifyClientCert
	default:
		tc.ClientAuth = tls.VerifyClientCertIfGiven // libtls' verify_client_optional
	}
	return tc, nil
}

// acceptTLS answers a client's SSLRequest with 'S' and runs the TLS
// handshake, bounded by the login deadline (or a minute when there is
// none); the login then goes on over the TLS connection.
func (p *Proxy) acceptTLS(c *client, tc *tls.Config) error {
	if _, err := c.lg.conn.Write([]byte{'S'}); err != nil {
		return err
	}
	tconn := tls.Server(c.lg.conn, tc)
	deadline := time.Now().Add(time.Minute)
	if d := p.conf().ClientLoginTimeout; d > 0 {
		deadline = c.connectTime.time().Add(d)
	}
	_ = tconn.SetDeadline(deadline)
	if err := tconn.Handshake(); err != nil {
		return err
	}
	if p.conf().ClientLoginTimeout <= 0 {
		_ = tconn.SetDeadline(time.Time{})
	}
	st := tconn.ConnectionState()
	c.tlsVersion, c.tlsSuite = st.Version, st.CipherSuite
	c.lg.conn = tconn
	c.lg.r.Reset(tconn)
	c.lg.w.Reset(tconn)
	return nil
}

// tlsInfo is SHOW CLIENTS' tls cell: PgBouncer's "TLSv1.3/<cipher>", ""
// for plain TCP.
func (c *client) tlsInfo() string {
	if c.tlsVersion == 0 {
		return ""
	}
	v := strings.Replace(tls.VersionName(c.tlsVersion), "TLS 1.", "TLSv1.", 1)
	return v + "/" + tls.CipherSuiteName(c.tlsSuite)
}

// loadCAFile reads the PEM certificates of a *_tls_ca_file setting, key
// naming it in the error.
func loadCAFile(key, path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s: %s: no PEM certificate in it", key, path)
	}
	return pool, nil
}
