//go:build linux

package pooler

import (
	"context"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/poolsim/poolsim/lab/pgcluster/pgclustertest"
	"github.com/poolsim/poolsim/models/poolconf"
	"github.com/poolsim/poolsim/models/poolmode"
)

// gate is a TCP relay to PostgreSQL that holds each connection until
// open is closed: a server login in flight for as long as a test needs.
type gate struct {
	ln       net.Listener
	open     chan struct{}
	accepted chan struct{} // one value per connection accepted
	wg       sync.WaitGroup
}

func startGate(t *testing.T, upstream string) *gate {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := &gate{ln: ln, open: make(chan struct{}), accepted: make(chan struct{}, 16)}
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			g.accepted <- struct{}{}
			g.wg.Add(1)
			go func() {
				defer g.wg.Done()
				defer c.Close()
				select {
				case <-g.open:
				case <-time.After(30 * time.Second):
					return
				}
				u, err := net.DialTimeout("tcp", upstream, 5*time.Second)
				if err != nil {
					return
				}
				defer u.Close()
				done := make(chan struct{}, 2)
				go func() { _, _ = io.Copy(u, c); done <- struct{}{} }()
				go func() { _, _ = io.Copy(c, u); done <- struct{}{} }()
				<-done
				_ = c.Close()
				_ = u.Close()
				<-done
			}()
		}
	}()
	t.Cleanup(func() { _ = ln.Close(); g.wg.Wait() })
	return g
}

func (g *gate) port() int { return g.ln.Addr().(*net.TCPAddr).Port }

// TestReloadDuringServerLogin: a server login in flight while a reload
// changes its database's connection settings (here connect_query) is not
// used when it completes - the client gets a server made under the new
// settings, as PgBouncer's tag_pool_dirty marks logins in flight too.
func TestReloadDuringServerLogin(t *testing.T) {
	c := pgclustertest.Need(t, cluster)
	ctx := testCtx(t, 60*time.Second)
	g := startGate(t, net.JoinHostPort("127.0.0.1", strconv.Itoa(c.Port())))
	ent := poolconf.NewDatabase("gated")
	ent.Host, ent.Port, ent.DBName, ent.User, ent.Password = "127.0.0.1", g.port(), "poolsim", "poolsim", "poolsim"
	tp := startProxy(t, func(cfg *Config) { cfg.Databases = append(cfg.Databases, ent) })
	dsn := strings.Replace(tp.dsn, "/poolsim?", "/gated?", 1)

	type answer struct {
		v   string
		err error
	}
	got := make(chan answer, 1)
	go func() {
		qctx, cancel := context.WithTimeout(ctx, 40*time.Second)
		defer cancel()
		conn, err := connectErr(qctx, dsn)
		if err != nil {
			got <- answer{err: err}
			return
		}
		defer conn.Close(context.Background())
		var v string
		err = conn.QueryRow(qctx, "select current_setting('enable_seqscan')").Scan(&v)
		got <- answer{v, err}
	}()
	select {
	case <-g.accepted: // the pool's first login is in flight, held
	case <-ctx.Done():
		t.Fatal("no server login reached the gate")
	}
	changed := *tp.conf()
	changed.Databases = append([]poolconf.Database(nil), changed.Databases...)
	for i := range changed.Databases {
		if changed.Databases[i].Name == "gated" {
			changed.Databases[i].ConnectQuery = "set enable_seqscan = off"
		}
	}
	if _, kept, err := tp.Reload(changed); err != nil || len(kept) != 0 {
		t.Fatalf("reload: %v, kept %q", err, kept)
	}
	close(g.open)
	select {
	case a := <-got:
		if a.err != nil || a.v != "off" {
			t.Errorf("enable_seqscan = %q, %v; want off: the login begun before the reload was used", a.v, a.err)
		}
	case <-ctx.Done():
		t.Fatal("no answer")
	}
}

// TestReconnectDropsWelcome: RECONNECT is PgBouncer's tag_pool_dirty,
// which drops the pool's welcome, so a server login PostgreSQL then
// refuses reaches the next client as its error at once, through both
// poolers - the clients do not wait for a retry as they would behind a
// pool that still has its welcome (a PostgreSQL restart's refusals).
func TestReconnectDropsWelcome(t *testing.T) {
	c := pgclustertest.Need(t, cluster)
	ctx := testCtx(t, 120*time.Second)
	su, err := pgconn.Connect(ctx, c.SuperuserDSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer su.Close(context.Background())
	exec := func(sql string) {
		t.Helper()
		if _, err := su.Exec(ctx, sql).ReadAll(); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	exec("DROP ROLE IF EXISTS rc_limited; CREATE ROLE rc_limited LOGIN")
	t.Cleanup(func() { _, _ = su.Exec(context.Background(), "DROP ROLE IF EXISTS rc_limited").ReadAll() })
	dbs := []string{fmt.Sprintf("rc = host=127.0.0.1 port=%d dbname=poolsim user=rc_limited", c.Port())}
	for _, tg := range srvTargetsFor(ctx, t, dbs, poolmode.Transaction, 2, map[string]string{"server_login_retry": "1"}) {
		exec("ALTER ROLE rc_limited CONNECTION LIMIT -1")
		if got, err := tg.queryOne(ctx, "rc", "select current_user", 15*time.Second); err != nil || got != "rc_limited" {
			t.Fatalf("%s: first query: %q, %v", tg.name, got, err)
		}
		exec("ALTER ROLE rc_limited CONNECTION LIMIT 0")
		tg.exec(ctx, t, "RECONNECT rc")
		start := time.Now()
		_, err := tg.queryOne(ctx, "rc", "select current_user", 20*time.Second)
		if err == nil || !strings.Contains(err.Error(), "too many connections for role") {
			t.Errorf("%s: after RECONNECT with the role's logins refused: %v; want PostgreSQL's refusal", tg.name, err)
		} else if d := time.Since(start); d > 10*time.Second {
			t.Errorf("%s: the refusal came after %v; want it at the first login, not after retries", tg.name, d)
		}
	}
}
