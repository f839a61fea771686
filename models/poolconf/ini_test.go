package poolconf

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/poolsim/poolsim/models/poolmode"
)

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	inc := filepath.Join(dir, "extra.ini")
	if err := os.WriteFile(inc, []byte("[users]\nbob = pool_mode=statement max_user_connections=3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	main := filepath.Join(dir, "pgbouncer.ini")
	text := `; a comment
# another
[databases]
app = host=127.0.0.1 port=5433 dbname=appdb pool_size=5 pool_mode=transaction
"odd name" = host=db.example port=5432 user=svc password='it\'s \\ quoted'
* = host=127.0.0.1 port=5433

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = 7432
auth_type = scram-sha-256
admin_users = alice, bob
query_wait_timeout = 0.5
server_lifetime = 0
ignore_startup_parameters = extra_float_digits,options
logfile = /var/log/pgbouncer.log
max_prepared_statements = 100
%include ` + inc + "\n"
	if err := os.WriteFile(main, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := Load(main)
	if err != nil {
		t.Fatal(err)
	}
	if s.ListenPort != 7432 || s.ListenAddr != "127.0.0.1" || s.AuthType != "scram-sha-256" ||
		!slices.Equal(s.AdminUsers, []string{"alice", "bob"}) || s.QueryWaitTimeout != 500*time.Millisecond ||
		s.ServerLifetime != 0 || s.MaxPreparedStatements != 100 || s.DefaultPoolSize != 20 ||
		!slices.Equal(s.IgnoreStartupParameters, []string{"extra_float_digits", "options"}) {
		t.Errorf("settings: %+v", s)
	}
	if s.Other["logfile"] != "/var/log/pgbouncer.log" {
		t.Errorf("Other = %v, want logfile kept", s.Other)
	}
	if len(s.Databases) != 3 {
		t.Fatalf("databases: %+v", s.Databases)
	}
	app, ok := s.Database("app")
	if !ok || app.Port != 5433 || app.DBName != "appdb" || app.PoolSize != 5 || app.PoolMode != poolmode.Transaction {
		t.Errorf("app = %+v", app)
	}
	odd, _ := s.Database("odd name")
	if odd.User != "svc" || odd.Password != `it's \ quoted` {
		t.Errorf("odd = %+v", odd)
	}
	other, ok := s.Database("whatever")
	if !ok || other.Name != "whatever" || other.Port != 5433 || other.PoolSize != Unset {
		t.Errorf("fallback = %+v %v", other, ok)
	}
	bob := s.User("bob")
	if bob.PoolMode != poolmode.Statement || bob.MaxUserConnections != 3 {
		t.Errorf("bob = %+v", bob)
	}
	// pool_mode: the user's wins over the database's, which wins over the global.
	if p := s.PoolFor(app, bob); p.Mode != poolmode.Statement || p.Size != 5 || p.MaxUserConnections != 3 {
		t.Errorf("PoolFor(app, bob) = %+v", p)
	}
	if p := s.PoolFor(app, s.User("carol")); p.Mode != poolmode.Transaction || p.MaxUserConnections != 0 {
		t.Errorf("PoolFor(app, carol) = %+v", p)
	}
	if p := s.PoolFor(other, s.User("carol")); p.Mode != poolmode.Session || p.Size != 20 {
		t.Errorf("PoolFor(*, carol) = %+v", p)
	}
	if !slices.Equal(s.Files, []string{main, inc}) {
		t.Errorf("Files = %v", s.Files)
	}
}

func TestLoadErrors(t *testing.T) {
	for _, tc := range []struct{ text, want string }{
		{"[pgbouncer]\nno_such_key = 1\n", "x.ini:2: bad pgbouncer.ini: no_such_key: unknown setting"},
		{"[pgbouncer]\ndefault_pool_size = lots\n", `x.ini:2: bad pgbouncer.ini: default_pool_size: "lots": want a whole number`},
		{"[pgbouncer]\npool_mode = direct\n", "pool_mode"},
		{"[databases]\napp = host=x bogus=1\n", `unknown database option "bogus"`},
		{"[databases]\napp = host='x\n", "unterminated"},
		{"listen_port = 1\n", "key outside a section"},
		{"[pgbouncer\n", "no closing ]"},
		{"[nonsense]\n", "unknown section"},
		{"[pgbouncer]\nauth_type = sometimes\n", "auth_type"},
		{"[pgbouncer]\nquery_wait_timeout = -1\n", "query_wait_timeout"},
		{"[users]\nbob = max_user_connections=x\n", "max_user_connections"},
		{"[peers]\n0 = host=/tmp\n", `peer id "0": want a number from 1 to 65535`},
		{"[peers]\nx = host=/tmp\n", `peer id "x"`},
		{"[peers]\n1 = port=6432\n", "host was not provided for peer 1"},
		{"[peers]\n1 = host=/tmp dbname=x\n", `unknown peer option "dbname"`},
		{"[peers]\n1 = host=/tmp port=0\n", "[peers] 1: port 0"},
		{"[peers]\n1 = host=/tmp pool_size=many\n", "pool_size"},
		{"[pgbouncer]\npeer_id = 16384\n", "peer_id: 16384: want 0 (no peering) to 16383"},
		{"[pgbouncer]\npeer_id = -1\n", "peer_id"},
	} {
		_, err := Parse("x.ini", []byte(tc.text))
		if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, ErrSyntax) {
			t.Errorf("Parse(%q) = %v, want an ErrSyntax naming %q", tc.text, err, tc.want)
		}
	}
}

// TestPeers: PgBouncer 1.19's peer_id and [peers] section are read -
// entries in id order, a later one for an id replacing the earlier one,
// port 6432 and pool_size Unset when not given.
func TestPeers(t *testing.T) {
	s, err := Parse("x.ini", []byte(`[peers]
3 = host=/tmp/pgb3 port=7000 pool_size=4
1 = host=10.0.0.1
2 = host=old
2 = host=@abstract port=6500

[pgbouncer]
peer_id = 2
`))
	if err != nil {
		t.Fatal(err)
	}
	want := []Peer{
		{ID: 1, Host: "10.0.0.1", Port: 6432, PoolSize: Unset},
		{ID: 2, Host: "@abstract", Port: 6500, PoolSize: Unset},
		{ID: 3, Host: "/tmp/pgb3", Port: 7000, PoolSize: 4},
	}
	if s.PeerID != 2 || !slices.Equal(s.Peers, want) {
		t.Errorf("peer_id %d, peers %+v; want 2, %+v", s.PeerID, s.Peers, want)
	}
	if v, ok := s.Text("peer_id"); !ok || v != "2" {
		t.Errorf("Text(peer_id) = %q, %v", v, ok)
	}
	if d := Defaults(); d.PeerID != 0 || d.Peers != nil {
		t.Errorf("defaults: peer_id %d, peers %v; want peering off", d.PeerID, d.Peers)
	}
}

func TestIncludeCycle(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.ini"), filepath.Join(dir, "b.ini")
	_ = os.WriteFile(a, []byte("%include "+b+"\n"), 0o644)
	_ = os.WriteFile(b, []byte("%include "+a+"\n"), 0o644)
	if _, err := Load(a); err == nil || !strings.Contains(err.Error(), "cycle") {
		t.Errorf("Load of a cycle = %v, want a cycle error", err)
	}
	if _, err := Load(filepath.Join(dir, "missing.ini")); err == nil || errors.Is(err, ErrSyntax) {
		t.Errorf("Load of a missing file = %v, want a read error", err)
	}
}

func TestDefaultsValid(t *testing.T) {
	s := Defaults()
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
}

// TestPoolShapingOverrides: a [databases] entry's min_pool_size and
// reserve_pool override the [pgbouncer] min_pool_size and
// reserve_pool_size (PgBouncer's pool_min_pool_size, pool_res_pool_size);
// server_tls_* and the server check keys have fields and PgBouncer 1.18's
// defaults.
func TestPoolShapingOverrides(t *testing.T) {
	s, err := Parse("t.ini", []byte(`[databases]
own = host=127.0.0.1 min_pool_size=3 reserve_pool=2 connect_query='set a=1; set b=2'
global = host=127.0.0.1
[pgbouncer]
min_pool_size = 1
reserve_pool_size = 4
server_tls_sslmode = verify-full
server_tls_ca_file = /etc/ca.crt
application_name_add_host = 1
server_round_robin = 1
`))
	if err != nil {
		t.Fatal(err)
	}
	own, _ := s.Database("own")
	global, _ := s.Database("global")
	if p := s.PoolFor(own, s.User("u")); p.MinPoolSize != 3 || p.ReservePool != 2 {
		t.Errorf("PoolFor(own) = %+v, want min 3, reserve 2", p)
	}
	if p := s.PoolFor(global, s.User("u")); p.MinPoolSize != 1 || p.ReservePool != 4 {
		t.Errorf("PoolFor(global) = %+v, want min 1, reserve 4", p)
	}
	if own.ConnectQuery != "set a=1; set b=2" {
		t.Errorf("connect_query = %q", own.ConnectQuery)
	}
	if s.ServerTLSSSLMode != "verify-full" || s.ServerTLSCAFile != "/etc/ca.crt" || !s.ApplicationNameAddHost || !s.ServerRoundRobin {
		t.Errorf("settings: %+v", s)
	}
	d := Defaults()
	if d.ServerTLSSSLMode != "disable" || d.ServerTLSProtocols != "secure" || d.ServerTLSCiphers != "fast" ||
		d.ServerCheckQuery != "select 1" || d.ServerCheckDelay != 30*time.Second {
		t.Errorf("defaults: %+v", d)
	}
	if _, err := Parse("t.ini", []byte("[pgbouncer]\nserver_tls_sslmode = sometimes\n")); err == nil || !strings.Contains(err.Error(), "server_tls_sslmode") {
		t.Errorf("server_tls_sslmode = sometimes: %v", err)
	}
}
