package pooler

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/poolsim/poolsim/lab/pgcluster/pgclustertest"
	"github.com/poolsim/poolsim/models/poolconf"
)

// TestReload: a new pool size applies live; a bad setting changes
// nothing; the listen address is kept and reported; a database whose
// server settings changed keeps its open transaction, which commits, and
// the server it ran on is closed after it, not reused.
func TestReload(t *testing.T) {
	c := pgclustertest.Need(t, cluster)
	tp := startProxy(t, func(c *Config) { c.DefaultPoolSize = 1 })
	ctx := testCtx(t, 30*time.Second)
	conn := connect(ctx, t, tp.dsn)
	admin := connect(ctx, t, tp.adminDSN())
	poolSize := func() string {
		_, rows := show(ctx, t, admin, "SHOW DATABASES")
		for _, r := range rows {
			if r["name"] == "poolsim" {
				return r["pool_size"]
			}
		}
		return ""
	}
	if got := poolSize(); got != "1" {
		t.Fatalf("pool_size before reload = %q, want 1", got)
	}
	cfg := *tp.conf()
	cfg.DefaultPoolSize = 3
	cfg.Listen = "127.0.0.1:1"
	changed, kept, err := tp.Reload(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got := poolSize(); got != "3" {
		t.Errorf("pool_size after reload = %q, want 3", got)
	}
	if !strings.Contains(strings.Join(changed, "\n"), "default_pool_size: 1 -> 3") {
		t.Errorf("changed = %q, want default_pool_size: 1 -> 3", changed)
	}
	if !strings.Contains(strings.Join(kept, "\n"), "listen_addr") || tp.conf().Listen == "127.0.0.1:1" {
		t.Errorf("kept = %q, listen %s: want the listen address kept and reported", kept, tp.conf().Listen)
	}
	bad := cfg
	bad.DefaultPoolSize = 0
	if _, _, err := tp.Reload(bad); err == nil || tp.conf().DefaultPoolSize != 3 {
		t.Errorf("reload with pool size 0: err %v, pool size %d; want an error and 3 kept", err, tp.conf().DefaultPoolSize)
	}

	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var in uint32
	if err := tx.QueryRow(ctx, "select pg_backend_pid()").Scan(&in); err != nil {
		t.Fatal(err)
	}
	// The database now has an entry of its own: same server, other
	// settings (a forced user), so its servers must go.
	moved := *tp.conf()
	ent := poolconf.NewDatabase("poolsim")
	ent.Host, ent.Port, ent.User, ent.Password = "127.0.0.1", c.Port(), "poolsim", "poolsim"
	moved.Databases = []poolconf.Database{ent}
	if _, kept, err := tp.Reload(moved); err != nil || len(kept) != 0 {
		t.Fatalf("reload with a database entry: %v, kept %q", err, kept)
	}
	if _, err := tx.Exec(ctx, "select 1"); err != nil {
		t.Errorf("open transaction after the reload: %v", err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Errorf("commit after the reload: %v", err)
	}
	var after uint32
	if err := conn.QueryRow(ctx, "select pg_backend_pid()").Scan(&after); err != nil {
		t.Fatal(err)
	}
	if after == in {
		t.Errorf("the server of the reloaded database (pid %d) was reused; it should close once released", in)
	}
}

// TestPauseResume: a paused pooler holds a query until Resume; pausing
// twice and resuming what is not paused get PgBouncer's texts.
func TestPauseResume(t *testing.T) {
	tp := startProxy(t, nil)
	ctx := testCtx(t, 30*time.Second)
	conn := connect(ctx, t, tp.dsn)
	if _, err := conn.Exec(ctx, "select 1"); err != nil {
		t.Fatal(err)
	}
	done, err := tp.Pause("")
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-done: // the only server was idle: closed at once
	case <-time.After(10 * time.Second):
		t.Fatal("pause not complete 10s after Pause with every server idle")
	}
	if _, err := tp.Pause(""); !errors.Is(err, ErrAlreadyPaused) || err.Error() != "already suspended/paused" {
		t.Errorf("second Pause: %v, want already suspended/paused", err)
	}
	got := make(chan error, 1)
	go func() {
		_, err := conn.Exec(ctx, "select 1")
		got <- err
	}()
	admin := connect(ctx, t, tp.adminDSN())
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, rows := show(ctx, t, admin, "SHOW POOLS")
		if i := slices.IndexFunc(rows, func(r map[string]string) bool { return r["database"] == "poolsim" }); i >= 0 && rows[i]["cl_waiting"] == "1" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no client waiting 10s into the pause: %v", rows)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := tp.Resume(""); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Errorf("query after Resume: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Error("query still waiting 10s after Resume")
	}
	if err := tp.Resume(""); !errors.Is(err, ErrNotPaused) || err.Error() != "pooler is not paused/suspended" {
		t.Errorf("Resume when not paused: %v", err)
	}
}
