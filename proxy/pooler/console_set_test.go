//go:build linux

package pooler

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/poolsim/poolsim/lab/pgbouncer"
	"github.com/poolsim/poolsim/models/poolconf"
	"github.com/poolsim/poolsim/models/poolmode"
)

// setTargets opens a console on a PgBouncer 1.18 and on a proxy, both in
// transaction mode.
func setTargets(ctx context.Context, t *testing.T) (theirs, ours *console, tp *testProxy) {
	t.Helper()
	b := needBouncer(ctx, t, pgbouncer.Config{UpstreamPort: cluster.Port(), Pooling: pgbouncer.Pool(poolmode.Transaction, 2)})
	tp = startProxy(t, nil)
	return openConsole(ctx, t, b.AdminDSN()), openConsole(ctx, t, tp.adminDSN()), tp
}

// showConfigValue is key's value in SHOW CONFIG.
func showConfigValue(ctx context.Context, t *testing.T, c *console, key string) string {
	t.Helper()
	r := c.run(ctx, t, "SHOW CONFIG")
	i := r.find("key", key)
	if i < 0 {
		t.Fatalf("SHOW CONFIG has no %s", key)
	}
	return r.cell(i, "value")
}

// TestConsoleSetEveryKey, on PgBouncer 1.18 and the proxy: SET of every
// key PgBouncer 1.18 lets change while running, to its default, gets the
// same answer (SET key=value, or the same error); a key no part of the
// proxy applies is recorded with a NOTICE saying so.
func TestConsoleSetEveryKey(t *testing.T) {
	ctx := testCtx(t, 60*time.Second)
	theirs, ours, _ := setTargets(ctx, t)
	for _, k := range poolconf.Keys18 {
		if !k.Changeable {
			continue
		}
		v := k.Default
		switch k.Name {
		case "auth_type":
			v = "trust" // md5 needs an auth_file the proxy here has not
		case "admin_users":
			continue // the consoles' own access
		}
		q := fmt.Sprintf("set %s = '%s'", k.Name, strings.ReplaceAll(v, "'", "''"))
		want, got := theirs.run(ctx, t, q), ours.run(ctx, t, q)
		if (want.err == nil) != (got.err == nil) || want.tag != got.tag ||
			(want.err != nil && want.err.Message != got.err.Message) {
			t.Errorf("%q:\n PgBouncer %v\n proxy     %v", q, want, got)
		}
		if _, applied := configFields[k.Name]; !applied && got.err == nil {
			if len(got.notices) != 1 || got.notices[0].Message != k.Name+" has no effect in poolsim proxy" {
				t.Errorf("%q on the proxy: notices %v, want one saying it has no effect", q, got)
			}
		}
	}
}

// TestConsoleSetValues, on PgBouncer 1.18 and the proxy: SET parses its
// value with PgBouncer's quoting and types, and SHOW CONFIG then shows the
// same value on both; what PgBouncer refuses the proxy refuses with the
// same error.
func TestConsoleSetValues(t *testing.T) {
	ctx := testCtx(t, 60*time.Second)
	theirs, ours, _ := setTargets(ctx, t)
	for _, tc := range []struct {
		q, key, value string // value "" for a refused command
	}{
		{"set query_timeout=1", "query_timeout", "1"},
		{"set idle_transaction_timeout = '2.5'", "idle_transaction_timeout", "2.5"},
		{`SET "client_idle_timeout" TO 3`, "client_idle_timeout", "3"},
		{"set server_check_query = 'select ''x'''", "server_check_query", "select 'x'"},
		{"set server_round_robin = 1", "server_round_robin", "1"},
		{"set tcp_keepidle = 30", "tcp_keepidle", "30"},
		{"set max_client_conn = 5", "max_client_conn", "5"},
		{"set pool_mode = 'session'", "pool_mode", "session"},
		{"set verbose = 2", "verbose", ""},
		{"set query_timeout = 1.5", "", ""},              // not a WORD: invalid command
		{"set server_tls_sslmode = verify-full", "", ""}, // the same
		{"set query_timeout = 'x'", "", ""},
		{"set tcp_keepidle = 'x'", "", ""},
		{"set server_tls_sslmode = 'nosuch'", "", ""},
		{"set nosuch = 1", "", ""},
	} {
		want, got := theirs.run(ctx, t, tc.q), ours.run(ctx, t, tc.q)
		if (want.err == nil) != (got.err == nil) || want.tag != got.tag ||
			(want.err != nil && want.err.Message != got.err.Message) {
			t.Errorf("%q:\n PgBouncer %v\n proxy     %v", tc.q, want, got)
			continue
		}
		if tc.key != "" && tc.value != "" {
			w, g := showConfigValue(ctx, t, theirs, tc.key), showConfigValue(ctx, t, ours, tc.key)
			if w != tc.value || g != tc.value {
				t.Errorf("%q: SHOW CONFIG %s: PgBouncer %q, proxy %q, want %q", tc.q, tc.key, w, g, tc.value)
			}
		}
	}
}

// TestConsoleSetTLS, on PgBouncer 1.18 and the proxy: client TLS set key
// by key; a key file that does not match the certificate leaves the TLS
// settings in force, with PgBouncer's NOTICE, and is tried again with the
// next TLS setting.
func TestConsoleSetTLS(t *testing.T) {
	ctx := testCtx(t, 60*time.Second)
	f := writeTLSFiles(t)
	theirs, ours, tp := setTargets(ctx, t)
	for _, q := range []string{
		"set client_tls_key_file = '" + f.key + "'",
		"set client_tls_cert_file = '" + f.cert + "'",
		"set client_tls_ca_file = '" + f.ca + "'",
		"set client_tls_sslmode = 'require'",
		"set client_tls_key_file = '" + f.clientKey + "'", // not the certificate's
		"set client_tls_key_file = '" + f.key + "'",
	} {
		want, got := theirs.run(ctx, t, q), ours.run(ctx, t, q)
		if (want.err == nil) != (got.err == nil) || want.tag != got.tag || len(want.notices) != len(got.notices) {
			t.Errorf("%q:\n PgBouncer %v\n proxy     %v", q, want, got)
			continue
		}
		for i, n := range want.notices {
			if got.notices[i].Message != n.Message {
				t.Errorf("%q: notice %q, PgBouncer's %q", q, got.notices[i].Message, n.Message)
			}
		}
		if strings.Contains(q, f.clientKey) {
			if len(got.notices) != 1 || got.notices[0].Message != "TLS settings could not be applied, still using old configuration" {
				t.Errorf("%q: %v, want PgBouncer's NOTICE", q, got)
			}
			if v := showConfigValue(ctx, t, ours, "client_tls_key_file"); v != f.clientKey {
				t.Errorf("SHOW CONFIG client_tls_key_file after a SET not applied: %q, want %q (as PgBouncer shows it)", v, f.clientKey)
			}
			if c := tp.conf(); c.ClientTLSKeyFile != f.key || tp.tls.Load() == nil {
				t.Errorf("in force after a SET not applied: key file %q, TLS %v; want %q, kept", c.ClientTLSKeyFile, tp.tls.Load() != nil, f.key)
			}
		}
	}
	if c := tp.conf(); c.ClientTLSKeyFile != f.key || len(c.Unapplied) != 0 {
		t.Errorf("after the matching key: key %q unapplied %v; want it in force", c.ClientTLSKeyFile, c.Unapplied)
	}
	// On the proxy, a key recorded but not applied is tried again with the
	// next TLS setting: the client key pair, set in two steps, is then in
	// force. (PgBouncer 1.18's libtls does not take a client certificate as
	// a server's, so this part runs on the proxy only.)
	for _, q := range []string{"set client_tls_key_file = '" + f.clientKey + "'", "set client_tls_cert_file = '" + f.clientCert + "'"} {
		if r := ours.run(ctx, t, q); r.err != nil {
			t.Fatalf("%s: %v", q, r)
		}
	}
	if c := tp.conf(); c.ClientTLSKeyFile != f.clientKey || c.ClientTLSCertFile != f.clientCert || len(c.Unapplied) != 0 {
		t.Errorf("after the key and its certificate: key %q cert %q unapplied %v; want both in force", c.ClientTLSKeyFile, c.ClientTLSCertFile, c.Unapplied)
	}
}

// TestConsoleSetLive: what SET changes is in force at once - a guard's
// timeout (the janitor reads it at its next tick) and max_client_conn (the
// next login).
func TestConsoleSetLive(t *testing.T) {
	ctx := testCtx(t, 30*time.Second)
	tp := startProxy(t, nil)
	admin := openConsole(ctx, t, tp.adminDSN())
	for _, q := range []string{"set query_timeout = 7", "set idle_transaction_timeout = 8", "set client_idle_timeout = 9", "set max_client_conn = 1"} {
		if r := admin.run(ctx, t, q); r.err != nil {
			t.Fatalf("%s: %v", q, r)
		}
	}
	c := tp.conf()
	if c.QueryTimeout != 7*time.Second || c.IdleTransactionTimeout != 8*time.Second || c.ClientIdleTimeout != 9*time.Second || c.MaxClientConn != 1 {
		t.Errorf("in force: query_timeout %v idle_transaction_timeout %v client_idle_timeout %v max_client_conn %d", c.QueryTimeout, c.IdleTransactionTimeout, c.ClientIdleTimeout, c.MaxClientConn)
	}
	first := pgConnect(ctx, t, tp.dsn)
	if err := run1(ctx, first, "select 1"); err != nil {
		t.Fatal(err)
	}
	_, err := pgconnConnect(ctx, tp.dsn)
	wantFatal(t, "a second client past max_client_conn 1", err, "no more connections allowed (max_client_conn)")
}

func pgconnConnect(ctx context.Context, dsn string) (*pgconn.PgConn, error) {
	c, err := pgconn.Connect(ctx, dsn)
	if err == nil {
		_ = c.Close(ctx)
	}
	return c, err
}
