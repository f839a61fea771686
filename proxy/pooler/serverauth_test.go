package pooler

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/poolsim/poolsim/lab/pgbouncer"
	"github.com/poolsim/poolsim/lab/pgcluster/pgclustertest"
	"github.com/poolsim/poolsim/models/poolconf"
)

// The roles of the authentication tests on the shared cluster, each with
// its own pg_hba method (the cluster trusts every other role): aut_pw
// (md5-stored password, method password), aut_md5 (md5), aut_scram
// (SCRAM-SHA-256), aut_check (the auth_user, superuser, md5) and aut_q
// (found by auth_query, SCRAM).
const (
	autPWPass, autMD5Pass, autSCRAMPass, autCheckPass, autQPass = "pw-pass", "md5-pass", "scram-pass", "check-pass", "q-pass"
)

var (
	authRolesOnce sync.Once
	authRolesErr  error
	autSCRAMSec   string // aut_scram's SCRAM secret, as pg_authid stores it
)

// authRoles creates the roles and their pg_hba lines once, and waits until
// PostgreSQL asks aut_md5 for a password.
func authRoles(t *testing.T) {
	t.Helper()
	c := pgclustertest.Need(t, cluster)
	authRolesOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		sec, err := secretFor(autSCRAMPass)
		if err != nil {
			authRolesErr = err
			return
		}
		autSCRAMSec = "SCRAM-SHA-256$4096:" + b64(sec.salt) + "$" + b64(sec.storedKey) + ":" + b64(sec.serverKey)
		hba := filepath.Join(c.DataDir(), "pg_hba.conf")
		old, err := os.ReadFile(hba)
		if err != nil {
			authRolesErr = err
			return
		}
		lines := "host all aut_pw 127.0.0.1/32 password\nhost all aut_md5 127.0.0.1/32 md5\n" +
			"host all aut_scram 127.0.0.1/32 scram-sha-256\nhost all aut_check 127.0.0.1/32 md5\n" +
			"host all aut_q 127.0.0.1/32 scram-sha-256\n"
		if err := os.WriteFile(hba, append([]byte(lines), old...), 0o600); err != nil {
			authRolesErr = err
			return
		}
		su, err := pgconn.Connect(ctx, c.SuperuserDSN("postgres"))
		if err != nil {
			authRolesErr = err
			return
		}
		defer su.Close(ctx)
		_, err = su.Exec(ctx, "SET password_encryption = 'md5';"+
			"CREATE ROLE aut_pw LOGIN PASSWORD '"+autPWPass+"';"+
			"CREATE ROLE aut_md5 LOGIN PASSWORD '"+autMD5Pass+"';"+
			"CREATE ROLE aut_check LOGIN SUPERUSER PASSWORD '"+autCheckPass+"';"+
			"SET password_encryption = 'scram-sha-256';"+
			"CREATE ROLE aut_scram LOGIN PASSWORD '"+autSCRAMSec+"';"+
			"CREATE ROLE aut_q LOGIN PASSWORD '"+autQPass+"';"+
			"SELECT pg_reload_conf()").ReadAll()
		if err != nil {
			authRolesErr = err
			return
		}
		// The reload is done once aut_md5 without a password is refused.
		for {
			conn, err := pgconn.Connect(ctx, fmt.Sprintf("postgres://aut_md5@127.0.0.1:%d/poolsim?sslmode=disable", c.Port()))
			if err != nil {
				var pe *pgconn.PgError
				if errors.As(err, &pe) && pe.Code == "28P01" {
					return
				}
				if ctx.Err() != nil {
					authRolesErr = fmt.Errorf("pg_hba reload: %w", err)
					return
				}
			} else {
				conn.Close(ctx)
			}
			select {
			case <-ctx.Done():
				authRolesErr = errors.New("pg_hba reload: aut_md5 still trusted after 30 s")
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	})
	if authRolesErr != nil {
		t.Fatalf("auth roles: %v", authRolesErr)
	}
}

// authUserFile writes an auth_file and returns its path.
func authUserFile(t *testing.T, users map[string]string) string {
	var b strings.Builder
	for u, s := range users {
		fmt.Fprintf(&b, "%q %q\n", u, s)
	}
	path := filepath.Join(t.TempDir(), "userlist.txt")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// passThroughUsers is the auth_file of the pass-through tests: aut_pw's
// plain password, aut_md5's md5 hash, aut_scram's SCRAM secret (as
// PgBouncer users copy them from pg_authid), and a wrong md5 hash.
func passThroughUsers() map[string]string {
	return map[string]string{
		"aut_pw":    autPWPass,
		"aut_md5":   "md5" + md5hex(autMD5Pass+"aut_md5"),
		"aut_scram": autSCRAMSec,
		"aut_check": autCheckPass,
	}
}

// authTarget is a pooler under test: a URL for a database and user with a
// password, and where its log is.
type authTarget struct {
	name string
	dsn  func(db, user, password string) string
	log  func() string
}

// proxyTarget starts a proxy with the auth file, auth_type and databases.
func proxyTarget(t *testing.T, authType, authFile string, dbs []poolconf.Database, edit func(*Config)) authTarget {
	var mu sync.Mutex
	var log strings.Builder
	tp := startProxy(t, func(c *Config) {
		c.AuthType, c.AuthFile = authType, authFile
		c.Databases = dbs
		c.Logf = func(format string, args ...any) {
			mu.Lock()
			fmt.Fprintf(&log, format+"\n", args...)
			mu.Unlock()
			t.Logf(format, args...)
		}
		if edit != nil {
			edit(c)
		}
	})
	addr := tp.Addr().String()
	return authTarget{
		name: "proxy",
		dsn: func(db, user, pw string) string {
			return fmt.Sprintf("postgres://%s:%s@%s/%s?sslmode=disable&connect_timeout=10", user, pw, addr, db)
		},
		log: func() string { mu.Lock(); defer mu.Unlock(); return log.String() },
	}
}

// bouncerTarget starts PgBouncer 1.18 with the same settings (skipped
// without it, outside CI).
func bouncerTarget(t *testing.T, authType string, users map[string]string, dbLines []string, extra map[string]string) authTarget {
	c := pgclustertest.Need(t, cluster)
	ctx := testCtx(t, 30*time.Second)
	b, err := pgbouncer.Start(ctx, pgbouncer.Config{UpstreamPort: c.Port(), AuthType: authType, Users: users, Databases: dbLines, Extra: extra})
	if err != nil {
		if pgclustertest.InCI() {
			t.Fatalf("pgbouncer: %v", err)
		}
		t.Skipf("pgbouncer: %v", err)
	}
	t.Cleanup(func() { _ = b.Stop() })
	return authTarget{
		name: "pgbouncer",
		dsn: func(db, user, pw string) string {
			return fmt.Sprintf("postgres://%s:%s@127.0.0.1:%d/%s?sslmode=disable&connect_timeout=10", user, pw, b.Port(), db)
		},
		log: func() string { b, _ := os.ReadFile(b.LogPath()); return string(b) },
	}
}

// tryQuery logs in and runs select 1; "" when it worked, else the
// server's message (or the error).
func tryQuery(ctx context.Context, dsn string) string {
	conn, err := pgconn.Connect(ctx, dsn)
	if err == nil {
		_, err = conn.Exec(ctx, "select 1").ReadAll()
		conn.Close(ctx)
	}
	if err == nil {
		return ""
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Message
	}
	return err.Error()
}

// passDB is a [databases] entry on the shared cluster without a user or
// password: server logins use the client's credentials.
func passDB(name string) poolconf.Database {
	d := poolconf.NewDatabase(name)
	d.Host, d.Port, d.DBName = "127.0.0.1", cluster.Port(), "poolsim"
	return d
}

func passDBLine(name string) string {
	return fmt.Sprintf("%s = host=127.0.0.1 port=%d dbname=poolsim", name, cluster.Port())
}

// TestServerLoginPassThrough: with no password in the [databases] entry,
// the server login answers PostgreSQL with the client's auth_file secret,
// as PgBouncer 1.18 does: a plain password under pg_hba "password", an md5
// hash under "md5", a SCRAM secret under "scram-sha-256" with the keys the
// client's own SCRAM login proved; a SCRAM secret whose keys no client
// proved fails at once with "server login failed: wrong password type"
// (not at the connect timeout), and a wrong secret gets the server's own
// "password authentication failed". Same cases through PgBouncer.
func TestServerLoginPassThrough(t *testing.T) {
	authRoles(t)
	users := passThroughUsers()
	for _, authType := range []string{AuthMD5, AuthTrust} {
		t.Run(authType, func(t *testing.T) {
			targets := []func(t *testing.T) authTarget{
				func(t *testing.T) authTarget {
					return proxyTarget(t, authType, authUserFile(t, users), []poolconf.Database{passDB("passdb")}, nil)
				},
				func(t *testing.T) authTarget {
					return bouncerTarget(t, authType, users, []string{passDBLine("passdb")}, nil)
				},
			}
			for _, start := range targets {
				tg := start(t)
				t.Run(tg.name, func(t *testing.T) {
					ctx := testCtx(t, 30*time.Second)
					cases := []struct{ user, pw, want string }{
						{"aut_pw", autPWPass, ""},
						{"aut_md5", autMD5Pass, ""},
					}
					if authType == AuthMD5 {
						// md5 with a SCRAM secret: the client is asked for SCRAM,
						// whose keys then log in to the server.
						cases = append(cases, struct{ user, pw, want string }{"aut_scram", autSCRAMPass, ""})
					} else {
						// trust: no client SCRAM exchange, no keys.
						cases = append(cases, struct{ user, pw, want string }{"aut_scram", "", "server login failed: wrong password type"})
					}
					for _, tc := range cases {
						start := time.Now()
						got := tryQuery(ctx, tg.dsn("passdb", tc.user, tc.pw))
						if got != tc.want {
							t.Errorf("%s %s: %q, want %q", authType, tc.user, got, tc.want)
						}
						if d := time.Since(start); d > 5*time.Second {
							t.Errorf("%s %s: took %v", authType, tc.user, d)
						}
					}
				})
			}
		})
	}
}

// TestServerLoginWrongSecret: an auth_file md5 hash that is not the role's
// gets PostgreSQL's refusal, passed to the client at once, from the proxy
// and from PgBouncer; the next client gets it too, without waiting.
func TestServerLoginWrongSecret(t *testing.T) {
	authRoles(t)
	users := map[string]string{"aut_md5": "md5" + md5hex("not-it"+"aut_md5")}
	for _, tg := range []authTarget{
		proxyTarget(t, AuthTrust, authUserFile(t, users), []poolconf.Database{passDB("passdb")}, func(c *Config) { c.ServerLoginRetry = 0 }),
		bouncerTarget(t, AuthTrust, users, []string{passDBLine("passdb")}, map[string]string{"server_login_retry": "0"}),
	} {
		ctx := testCtx(t, 30*time.Second)
		for i := range 2 {
			start := time.Now()
			got := tryQuery(ctx, tg.dsn("passdb", "aut_md5", ""))
			if !strings.Contains(got, `password authentication failed for user "aut_md5"`) {
				t.Errorf("%s: login %d: %q, want PostgreSQL's password authentication failed", tg.name, i, got)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("%s: login %d took %v", tg.name, i, d)
			}
		}
	}
}

// TestMixedAuthFile: one auth_file with plain, md5 and SCRAM secrets (and
// a broken line, reported with its number by the proxy) serves each
// auth_type as PgBouncer 1.18 does: md5 asks a SCRAM user for SCRAM,
// scram-sha-256 refuses the md5 user, plain checks every kind (but its
// SCRAM user cannot reach a SCRAM server); the texts of
// the refusals and their "closing because" log lines are PgBouncer's.
func TestMixedAuthFile(t *testing.T) {
	authRoles(t)
	users := passThroughUsers()
	type login struct{ user, pw, want string }
	ok := func(u, pw string) login { return login{u, pw, ""} }
	cases := map[string][]login{
		AuthMD5: {ok("aut_pw", autPWPass), ok("aut_md5", autMD5Pass), ok("aut_scram", autSCRAMPass),
			{"aut_md5", "wrong", "password authentication failed"}, {"aut_scram", "wrong", "SASL authentication failed"},
			{"nobody", "x", "password authentication failed"}},
		AuthSCRAM: {ok("aut_pw", autPWPass), ok("aut_scram", autSCRAMPass),
			{"aut_md5", autMD5Pass, "SASL authentication failed"}, {"nobody", "x", "SASL authentication failed"}},
		// plain checks the SCRAM secret, but a clear-text login proves no
		// SCRAM keys: the server login fails as in PgBouncer.
		AuthPlain: {ok("aut_pw", autPWPass), ok("aut_md5", autMD5Pass),
			{"aut_scram", autSCRAMPass, "server login failed: wrong password type"},
			{"aut_scram", "wrong", "password authentication failed"}},
	}
	for _, authType := range []string{AuthMD5, AuthSCRAM, AuthPlain} {
		t.Run(authType, func(t *testing.T) {
			path := authUserFile(t, users)
			f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = f.WriteString("\"broken\" no-quotes\n")
			_ = f.Close()
			for _, tg := range []authTarget{
				proxyTarget(t, authType, path, []poolconf.Database{passDB("passdb")}, nil),
				bouncerTarget(t, authType, users, []string{passDBLine("passdb")}, nil),
			} {
				ctx := testCtx(t, 30*time.Second)
				for _, tc := range cases[authType] {
					got := tryQuery(ctx, tg.dsn("passdb", tc.user, tc.pw))
					if got != tc.want {
						t.Errorf("%s %s %s/%s: %q, want %q", tg.name, authType, tc.user, tc.pw, got, tc.want)
					}
					if tc.want != "" && !strings.Contains(tg.log(), "closing because: "+tc.want) {
						t.Errorf("%s %s %s: no %q in the log", tg.name, authType, tc.user, "closing because: "+tc.want)
					}
				}
				if tg.name == "proxy" && !strings.Contains(tg.log(), "broken auth file "+path+": line 5") {
					t.Errorf("proxy: the broken line 5 is not reported:\n%s", tg.log())
				}
			}
		})
	}
}

// TestLoggedInConn: the connection handed to pgconn after the proxy's own
// login drops pgconn's StartupMessage however it is split across writes,
// passes what follows, reads AuthenticationOk first, and is given back
// bare only when nothing is left buffered.
func TestLoggedInConn(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	sm, _ := (&pgproto3.StartupMessage{ProtocolVersion: protocol30, Parameters: map[string]string{"user": "u"}}).Encode(nil)
	ok, _ := (&pgproto3.AuthenticationOk{}).Encode(nil)
	lc := &loggedInConn{Conn: a, pending: bytes.NewReader(ok), br: bufio.NewReader(a), skip: -1}
	got := make(chan []byte, 1)
	go func() { // owner: this test; ends when it has read 3 bytes
		buf := make([]byte, 3)
		_, _ = io.ReadFull(b, buf)
		got <- buf
	}()
	for _, part := range [][]byte{sm[:2], sm[2:7], append(append([]byte(nil), sm[7:]...), 'x'), []byte("yz")} {
		if n, err := lc.Write(part); err != nil || n != len(part) {
			t.Fatalf("Write(%d bytes) = %d, %v", len(part), n, err)
		}
	}
	if s := string(<-got); s != "xyz" {
		t.Errorf("passed to the server: %q, want xyz (the StartupMessage dropped)", s)
	}
	buf := make([]byte, 16)
	if n, err := lc.Read(buf); err != nil || !bytes.Equal(buf[:n], ok) {
		t.Errorf("first read: %x, %v; want AuthenticationOk %x", buf[:n], err, ok)
	}
	if c, err := serverConnOf(lc); err != nil || c != a {
		t.Errorf("serverConnOf: %v, %v; want the bare connection", c, err)
	}
	lc.pending = bytes.NewReader(ok)
	if _, err := serverConnOf(lc); err == nil {
		t.Errorf("serverConnOf with bytes unread: no error")
	}
}

// TestShowFDsSCRAMKeys: after a SCRAM login against a SCRAM secret, SHOW
// FDS lists the keys the client proved with the user's connections (what
// an online restart hands over so that the new process can log in to the
// server), on the proxy and on PgBouncer 1.18.
func TestShowFDsSCRAMKeys(t *testing.T) {
	authRoles(t)
	users := passThroughUsers()
	for _, tg := range []authTarget{
		proxyTarget(t, AuthMD5, authUserFile(t, users), []poolconf.Database{passDB("passdb")}, func(c *Config) {
			c.AdminUsers = []string{"aut_pw"}
		}),
		bouncerTarget(t, AuthMD5, users, []string{passDBLine("passdb")}, map[string]string{"admin_users": "aut_pw"}),
	} {
		ctx := testCtx(t, 30*time.Second)
		conn := connect(ctx, t, tg.dsn("passdb", "aut_scram", autSCRAMPass))
		if _, err := conn.Exec(ctx, "select 1"); err != nil {
			t.Fatalf("%s: %v", tg.name, err)
		}
		admin := connect(ctx, t, tg.dsn("pgbouncer", "aut_pw", autPWPass))
		rows, err := admin.Query(ctx, "SHOW FDS")
		if err != nil {
			t.Fatalf("%s: SHOW FDS: %v", tg.name, err)
		}
		keyed := 0
		for rows.Next() {
			// Raw values: the cancel column is an int8 that may hold a key
			// above int64's range, in PgBouncer as in the proxy.
			vals := rows.RawValues()
			m := map[string][]byte{}
			for i, f := range rows.FieldDescriptions() {
				m[f.Name] = vals[i]
			}
			if string(m["user"]) == "aut_scram" && m["scram_client_key"] != nil && m["scram_server_key"] != nil {
				keyed++
			}
		}
		rows.Close()
		if keyed == 0 {
			t.Errorf("%s: SHOW FDS: no aut_scram connection with its SCRAM keys", tg.name)
		}
		conn.Close(ctx)
		admin.Close(ctx)
	}
}

// TestTakeOverAuth: what SHOW FDS lists for a connection (fdAuth) and
// takeOverAuth takes in give the same credentials back: the auth_query
// secret of a user not in auth_file and the SCRAM keys of its secret.
func TestTakeOverAuth(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Listen, cfg.Upstream = "127.0.0.1:0", "postgres://x@127.0.0.1:1/x"
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ck, sk := bytes.Repeat([]byte{1}, 32), bytes.Repeat([]byte{2}, 32)
	p.takeOverAuth("db", "u", fixedSCRAMSecret(), ck, sk)
	got := p.fdAuth(&pool{key: poolKey{"db", "u"}})
	if got[0] != fixedSCRAMSecret() || !bytes.Equal(got[1].([]byte), ck) || !bytes.Equal(got[2].([]byte), sk) {
		t.Errorf("fdAuth after takeOverAuth = %v", got)
	}
	if got := p.fdAuth(&pool{key: poolKey{"db", "other"}}); got[0] != nil || got[1] != nil {
		t.Errorf("fdAuth of a user never seen = %v, want NULLs", got)
	}
}

// fixedSCRAMSecret is a SCRAM secret (PgBouncer's suite's scramuser1) for
// tests that need no cluster.
func fixedSCRAMSecret() string {
	return "SCRAM-SHA-256$4096:D76gvGUVj9Z4DNiGoabOBg==$RukL0Xo3Ql/2F9FsD7mcQ3GATG2fD3PA71qY1JagGDs=:BhKUwyyivFm7Tq2jDJVXSVRbRDgTWyBilZKgg6DDuYU="
}
