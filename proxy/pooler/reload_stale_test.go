package pooler

import (
	"context"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/poolsim/poolsim/lab/pgcluster/pgclustertest"
	"github.com/poolsim/poolsim/models/poolconf"
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
