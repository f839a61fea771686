//go:build linux

package pooler

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/poolsim/poolsim/lab/pgbouncer"
	"github.com/poolsim/poolsim/models/poolconf"
	"github.com/poolsim/poolsim/models/poolmode"
)

// TestAuthQuery: a user missing from auth_file is looked up with
// auth_query run as auth_user (global, then per database), on the proxy
// and on PgBouncer 1.18: its SCRAM secret serves an md5 login (asked for
// SCRAM) and then the server login (the keys the client proved); an
// unknown user gets "no such user" (logged "closing because: no such
// user"), a wrong password "SASL authentication failed".
func TestAuthQuery(t *testing.T) {
	authRoles(t)
	users := map[string]string{"aut_check": autCheckPass}
	for _, perDB := range []bool{false, true} {
		t.Run(fmt.Sprintf("per-database=%v", perDB), func(t *testing.T) {
			d := passDB("passdb")
			line := passDBLine("passdb")
			extra := map[string]string{"auth_user": "aut_check"}
			if perDB {
				d.AuthUser = "aut_check"
				line += " auth_user=aut_check"
				extra = nil
			}
			for _, tg := range []authTarget{
				proxyTarget(t, AuthMD5, authUserFile(t, users), []poolconf.Database{d}, func(c *Config) {
					if !perDB {
						c.AuthUser = "aut_check"
					}
				}),
				bouncerTarget(t, AuthMD5, users, []string{line}, extra),
			} {
				ctx := testCtx(t, 30*time.Second)
				for _, tc := range []struct{ user, pw, want string }{
					{"aut_q", autQPass, ""},
					{"aut_q", autQPass, ""}, // the pool's server is reused
					{"aut_nobody", "x", "no such user"},
					{"aut_q", "wrong", "SASL authentication failed"},
				} {
					if got := tryQuery(ctx, tg.dsn("passdb", tc.user, tc.pw)); got != tc.want {
						t.Errorf("%s: %s/%s: %q, want %q", tg.name, tc.user, tc.pw, got, tc.want)
					}
				}
				if !strings.Contains(tg.log(), "closing because: no such user (age=") {
					t.Errorf("%s: no \"closing because: no such user\" in the log", tg.name)
				}
			}
		})
	}
}

// TestAuthDBName: auth_dbname (PgBouncer 1.19; 1.18 lacks it) runs
// auth_query on another database's server; naming a database that is not
// configured refuses with "bouncer config error" and logs why, a disabled
// one with `authentication database "X" is disabled`; a database's own
// auth_dbname wins over the global one. A database no entry serves is "no
// such database", logged as PgBouncer logs it.
func TestAuthDBName(t *testing.T) {
	authRoles(t)
	users := map[string]string{"aut_check": autCheckPass, "poolsim": "poolsim"}
	authdb := passDB("authdb")
	d := passDB("passdb")
	d.AuthDBName = "authdb"
	plain := passDB("plaindb")
	tg := proxyTarget(t, AuthMD5, authUserFile(t, users), []poolconf.Database{authdb, d, plain}, func(c *Config) {
		c.AuthUser, c.AuthDBName = "aut_check", "nowhere"
		c.Upstream = "" // no fallback: only the entries above are served
	})
	ctx := testCtx(t, 30*time.Second)
	checkers := func() int64 { // aut_check's server connections
		var n int64
		su := connect(ctx, t, cluster.SuperuserDSN("postgres"))
		defer su.Close(ctx)
		if err := su.QueryRow(ctx, "select count(*) from pg_stat_activity where usename = 'aut_check'").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	for checkers() != 0 { // those of earlier tests are closing
		select {
		case <-ctx.Done():
			t.Fatalf("aut_check connections of earlier tests still open")
		case <-time.After(20 * time.Millisecond):
		}
	}
	for range 3 {
		if got := tryQuery(ctx, tg.dsn("passdb", "aut_q", autQPass)); got != "" {
			t.Errorf("passdb (auth_dbname=authdb): %q", got)
		}
	}
	if n := checkers(); n != 1 {
		t.Errorf("3 lookups: %d auth_query connections open, want the one kept", n)
	}
	if got := tryQuery(ctx, tg.dsn("plaindb", "aut_q", autQPass)); got != "bouncer config error" {
		t.Errorf("plaindb (global auth_dbname=nowhere): %q, want bouncer config error", got)
	}
	if !strings.Contains(tg.log(), `authentication database "nowhere" is not configured`) {
		t.Errorf("not logged: authentication database \"nowhere\" is not configured")
	}
	// A database nothing serves, after a good login (the lab's PgBouncer
	// always has a "*" entry; the text is checked against it elsewhere).
	if got := tryQuery(ctx, tg.dsn("nosuchdb", "aut_check", autCheckPass)); got != "no such database: nosuchdb" {
		t.Errorf("nosuchdb: %q", got)
	}
	if !strings.Contains(tg.log(), "closing because: no such database: nosuchdb (age=") {
		t.Errorf("not logged: closing because: no such database: nosuchdb")
	}
	conn := connect(ctx, t, strings.Replace(tg.dsn("pgbouncer", "poolsim", "poolsim"), "&connect_timeout=10", "", 1)+"&default_query_exec_mode=simple_protocol")
	if _, err := conn.Exec(ctx, "DISABLE authdb"); err != nil {
		t.Fatalf("DISABLE authdb: %v", err)
	}
	if got := tryQuery(ctx, tg.dsn("passdb", "aut_q", autQPass)); got != `authentication database "authdb" is disabled` {
		t.Errorf("passdb with authdb disabled: %q", got)
	}
}

// TestHBA: auth_type = hba with an auth_hba_file: each line's method
// (password, md5, scram-sha-256, reject, trust) applies to the users it
// names, the first match wins and no match is "login rejected", on the
// proxy and on PgBouncer 1.18; bad lines are skipped.
func TestHBA(t *testing.T) {
	authRoles(t)
	users := passThroughUsers()
	dir, err := os.MkdirTemp("", "poolsim-hba-") // PgBouncer (the postgres account) reads it
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	hba := filepath.Join(dir, "hba.conf")
	rules := "# the tests' rules\n" +
		"host all aut_pw 127.0.0.1/32 password\n" +
		"host passdb aut_md5 127.0.0.1 255.255.255.255 md5\n" +
		"hostssl all aut_scram 127.0.0.1/32 trust\n" +
		"host all aut_scram,\"aut_check\" 127.0.0.0/8 scram-sha-256\n" +
		"host all aut_md5 127.0.0.1/32 reject\n" +
		"local all all trust\n"
	if err := os.WriteFile(hba, []byte(rules), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tg := range []authTarget{
		proxyTarget(t, AuthHBA, authUserFile(t, users), []poolconf.Database{passDB("passdb"), passDB("otherdb")}, func(c *Config) {
			c.AuthHBAFile = hba
		}),
		bouncerTarget(t, AuthHBA, users, []string{passDBLine("passdb"), passDBLine("otherdb")}, map[string]string{"auth_hba_file": hba}),
	} {
		ctx := testCtx(t, 30*time.Second)
		for _, tc := range []struct{ db, user, pw, want string }{
			{"passdb", "aut_pw", autPWPass, ""},
			{"passdb", "aut_pw", "wrong", "password authentication failed"},
			{"passdb", "aut_md5", autMD5Pass, ""},
			{"otherdb", "aut_md5", autMD5Pass, "login rejected"},
			{"passdb", "aut_scram", autSCRAMPass, ""},
			{"passdb", "aut_scram", "wrong", "SASL authentication failed"},
			{"passdb", "aut_q", autQPass, "login rejected"},
		} {
			if got := tryQuery(ctx, tg.dsn(tc.db, tc.user, tc.pw)); got != tc.want {
				t.Errorf("%s: %s %s/%s: %q, want %q", tg.name, tc.db, tc.user, tc.pw, got, tc.want)
			}
		}
		if t.Failed() {
			t.Logf("%s log:\n%s", tg.name, tg.log())
		}
	}
}

// TestHBAParse: the hba parser's rules and refusals, line by line.
func TestHBAParse(t *testing.T) {
	dir := t.TempDir()
	_ = os.WriteFile(filepath.Join(dir, "users.txt"), []byte("ann, bob\ncarl\n"), 0o644)
	path := filepath.Join(dir, "hba.conf")
	content := "host all @users.txt 10.0.0.0/8 md5\n" +
		"hostnossl sameuser all ::1/128 scram-sha-256\n" +
		"host all all 127.0.0.1/32 ident\n" + // unsupported method: skipped
		"host all all 300.0.0.1/32 trust\n" + // bad address: skipped
		"host all all 127.0.0.1/32 trust extra\n" + // trailing field: skipped
		"host replication all 127.0.0.1/32 trust\n" +
		"hostssl \"all\" all 0.0.0.0/0 cert\n"
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	rules, bad, err := loadHBA(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(rules) != 3 || len(bad) != 4 {
		t.Fatalf("loadHBA: %d rules, bad %q; want 3 rules and lines 3-6 bad", len(rules), bad)
	}
	for i, b := range bad {
		if !strings.Contains(b, "line "+strconv.Itoa(i+3)+" ") {
			t.Errorf("bad[%d] = %q, want line %d", i, b, i+3)
		}
	}
	ap := func(s string) netip.AddrPort { return netip.MustParseAddrPort(s) }
	for _, tc := range []struct {
		addr     string
		tls      bool
		db, user string
		want     string
	}{
		{"10.1.2.3:5", false, "x", "bob", AuthMD5},
		{"10.1.2.3:5", false, "x", "dan", AuthReject},
		{"[::1]:5", false, "eve", "eve", AuthSCRAM},
		{"[::1]:5", true, "eve", "eve", AuthReject},
		{"[::1]:5", false, "x", "eve", AuthReject},
		{"192.168.1.1:5", true, "all", "x", AuthCert}, // "all" quoted: a database name
		{"192.168.1.1:5", true, "db", "x", AuthReject},
	} {
		if got := hbaMethod(rules, ap(tc.addr), tc.tls, tc.db, tc.user); got != tc.want {
			t.Errorf("%s tls=%v %s/%s: %s, want %s", tc.addr, tc.tls, tc.db, tc.user, got, tc.want)
		}
	}
}

// TestCertAuth: auth_type = cert with client_tls_sslmode verify-full: psql
// with the client certificate made for poolsim logs in as poolsim and is
// refused as another user ("certificate authentication failed"), on the
// proxy and on PgBouncer 1.18.
func TestCertAuth(t *testing.T) {
	needTool(t, "psql")
	ctx := testCtx(t, 60*time.Second)
	f := writeTLSFiles(t)
	users := map[string]string{"poolsim": "poolsim", "postgres": ""}
	b := needBouncer(ctx, t, pgbouncer.Config{UpstreamPort: cluster.Port(), Pooling: pgbouncer.Pool(poolmode.Transaction, 20),
		AuthType: AuthCert, Users: users, Extra: map[string]string{
			"client_tls_sslmode": "verify-full", "client_tls_cert_file": f.cert, "client_tls_key_file": f.key,
			"client_tls_ca_file": f.ca}})
	tp := startProxy(t, func(c *Config) {
		c.ClientTLSSSLMode, c.ClientTLSCertFile, c.ClientTLSKeyFile, c.ClientTLSCAFile = "verify-full", f.cert, f.key, f.ca
		c.AuthType, c.AuthFile = AuthCert, authUserFile(t, users)
	})
	certs := fmt.Sprintf("sslcert=%s sslkey=%s sslrootcert=%s", f.clientCert, f.clientKey, f.ca)
	for _, tg := range []tlsTarget{
		{name: "pgbouncer", addr: net.JoinHostPort(b.Host(), strconv.Itoa(b.Port()))},
		{name: "proxy", addr: tp.Addr().String()},
	} {
		if out, err := psqlTLS(ctx, t, tg, "poolsim", "verify-ca", certs, "select 7"); err != nil || out != "7" {
			t.Errorf("%s: poolsim with its certificate: %q, %v", tg.name, out, err)
		}
		out, err := psqlTLS(ctx, t, tg, "poolsim", "verify-ca", certs+" user=postgres", "select 7")
		if err == nil || !strings.Contains(out, "certificate authentication failed") {
			t.Errorf("%s: postgres with poolsim's certificate: %q, %v; want certificate authentication failed", tg.name, out, err)
		}
	}
}

// TestSetAuthSettings: the console's SET of auth_type with an auth_file
// that mixes md5 and SCRAM secrets (which used to fail: "SET failed"), and
// of auth_user, which then serves the next logins, on the proxy and on
// PgBouncer 1.18; the proxy also takes auth_dbname (PgBouncer 1.19).
func TestSetAuthSettings(t *testing.T) {
	authRoles(t)
	users := passThroughUsers()
	users["poolsim"] = "poolsim"
	ptg := proxyTarget(t, AuthTrust, authUserFile(t, users), []poolconf.Database{passDB("passdb"), passDB("authdb")}, nil)
	btg := bouncerTarget(t, AuthTrust, users, []string{passDBLine("passdb"), passDBLine("authdb")},
		map[string]string{"admin_users": "poolsim"})
	for _, tg := range []authTarget{ptg, btg} {
		ctx := testCtx(t, 30*time.Second)
		admin := connect(ctx, t, tg.dsn("pgbouncer", "poolsim", "poolsim"))
		for _, q := range []string{"SET auth_type = 'md5'", "SET auth_user = 'aut_check'"} {
			if _, err := admin.Exec(ctx, q); err != nil {
				t.Fatalf("%s: %s: %v", tg.name, q, err)
			}
		}
		if got := tryQuery(ctx, tg.dsn("passdb", "aut_q", autQPass)); got != "" {
			t.Errorf("%s: aut_q through auth_user set by SET: %q", tg.name, got)
		}
		if tg.name == "proxy" {
			if _, err := admin.Exec(ctx, "SET auth_dbname = 'authdb'"); err != nil {
				t.Fatalf("proxy: SET auth_dbname: %v", err)
			}
			if got := tryQuery(ctx, tg.dsn("passdb", "aut_q", autQPass)); got != "" {
				t.Errorf("proxy: aut_q with auth_dbname set by SET: %q", got)
			}
		}
	}
}
