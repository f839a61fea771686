package pooler

import (
	"errors"
	"fmt"
	"time"
)

// The console's commands other than SHOW, with PgBouncer 1.18's checks in
// its order and its error texts (src/admin.c). Every one that changes
// anything needs admin access.

// databases: PgBouncer's find_database and find_or_register_database. A
// database exists when [databases] names it, a pool serves it, or a
// command registered it; the console's own database is "pgbouncer". A name
// the fallback entry (the upstream URL, or "*") could serve is registered
// by the commands that register.

// findDB reports whether database name exists.
func (p *Proxy) findDB(name string) bool {
	if name == adminDB {
		return true
	}
	for _, d := range p.conf().Databases {
		if d.Name == name && d.Name != "*" {
			return true
		}
	}
	p.mu.Lock()
	for k := range p.pools {
		if k.db == name {
			p.mu.Unlock()
			return true
		}
	}
	p.mu.Unlock()
	p.console.mu.Lock()
	defer p.console.mu.Unlock()
	return p.console.registered[name]
}

// findOrRegisterDB is findDB, registering name when the fallback entry
// can serve it.
func (p *Proxy) findOrRegisterDB(name string) bool {
	if p.findDB(name) {
		return true
	}
	cfg := p.conf()
	if _, _, ok := cfg.poolFor(name, ""); !ok {
		return false
	}
	p.console.mu.Lock()
	defer p.console.mu.Unlock()
	if p.console.registered == nil {
		p.console.registered = map[string]bool{}
	}
	p.console.registered[name] = true
	p.logf("registered new auto-database: %s", name)
	return true
}

// dbDisabled reports whether DISABLE closed database name to new clients.
func (p *Proxy) dbDisabled(name string) bool {
	p.console.mu.Lock()
	defer p.console.mu.Unlock()
	return p.console.disabled[name]
}

// errDisabled is the login error of a disabled database (PgBouncer's
// finish_client_login).
func errDisabled(db string) string { return fmt.Sprintf("database \"%s\" is disabled", db) }

// dbArg logs the command as PgBouncer does ("CMD command issued", "CMD
// 'db' command issued") and checks its database: it must exist (or, with
// register, be registered from the fallback entry) and, for verb != "", not
// be the console's own ("cannot <verb> admin db: ..."). "" stands for every
// database and passes.
func (x *consoleCmd) dbArg(cmd, arg string, register bool, verb string) (consoleReply, bool) {
	if arg == "" {
		x.p.logf("%s command issued", cmd)
		return consoleReply{}, true
	}
	x.p.logf("%s '%s' command issued", cmd, arg)
	found := x.p.findDB(arg)
	if register {
		found = x.p.findOrRegisterDB(arg)
	}
	if !found {
		return x.fail("no such database: " + arg), false
	}
	if verb != "" && arg == adminDB {
		return x.fail("cannot " + verb + " admin db: " + arg), false
	}
	return consoleReply{}, true
}

// pause is PAUSE [db]: the answer waits until the paused pools have no
// server left.
func (x *consoleCmd) pause(arg string) consoleReply {
	if r, ok := x.needAdmin(); !ok {
		return r
	}
	if x.p.pausedAll() {
		return x.fail(ErrAlreadyPaused.Error())
	}
	if r, ok := x.dbArg("PAUSE", arg, true, "pause"); !ok {
		return r
	}
	done, err := x.p.Pause(arg)
	if err != nil {
		return x.fail(err.Error())
	}
	select {
	case <-done:
		return ready("PAUSE")
	case <-x.p.stopping:
		return consoleReply{close: true}
	}
}

// resume is RESUME [db].
func (x *consoleCmd) resume(arg string) consoleReply {
	if r, ok := x.needAdmin(); !ok {
		return r
	}
	if r, ok := x.dbArg("RESUME", arg, false, ""); !ok {
		return r
	}
	if err := x.p.Resume(arg); err != nil {
		return x.fail(err.Error())
	}
	return ready("RESUME")
}

// reload is RELOAD: the settings are read again (Config.Source) and put in
// force as Reload does.
func (x *consoleCmd) reload(arg string) consoleReply {
	if arg != "" {
		return x.syntaxError()
	}
	if r, ok := x.needAdmin(); !ok {
		return r
	}
	x.p.logf("RELOAD command issued")
	if err := x.p.reloadSource(); err != nil {
		// PgBouncer logs a bad file and keeps its settings; RELOAD answers.
		x.p.logf("reload failed, the old settings stay: %v", err)
	}
	return ready("RELOAD")
}

// reloadSource reads the settings again from Config.Source (else keeps the
// ones in force, reading the auth file again) and reloads them.
func (p *Proxy) reloadSource() error {
	cfg := *p.conf()
	if cfg.Source != nil {
		next, err := cfg.Source()
		if err != nil {
			return err
		}
		cfg = next
	}
	_, _, err := p.Reload(cfg)
	return err
}

// reconnect is RECONNECT [db]: every server of the database (of every
// database) is closed when next released, idle ones at once.
func (x *consoleCmd) reconnect(arg string) consoleReply {
	if r, ok := x.needAdmin(); !ok {
		return r
	}
	if r, ok := x.dbArg("RECONNECT", arg, true, "reconnect"); !ok {
		return r
	}
	x.p.loop.call(func() {
		for _, pl := range x.p.loopPools {
			if arg == "" || pl.key.db == arg {
				pl.tagDirty()
			}
		}
	})
	return ready("RECONNECT")
}

// tagDirty is PgBouncer's tag_pool_dirty: the pool's welcome is dropped
// (the next clients wait for a new server's), every server closes when
// next released, idle ones now, and a login in flight is not used
// (loggedIn). It runs on the loop.
func (p *pool) tagDirty() {
	p.params = nil
	p.dirtyGen++
	for s := range p.servers {
		s.closeNeeded = true
	}
	p.closeIdle(p.px.loop.now, 0, "close needed (RECONNECT)")
}

// disable is DISABLE db: new clients of the database are refused.
func (x *consoleCmd) disable(arg string) consoleReply {
	if r, ok := x.needAdmin(); !ok {
		return r
	}
	if arg == "" {
		return x.fail("a database is required")
	}
	if r, ok := x.dbArg("DISABLE", arg, true, "disable"); !ok {
		return r
	}
	x.p.setDisabled(arg, true)
	return ready("DISABLE")
}

// enable is ENABLE db.
func (x *consoleCmd) enable(arg string) consoleReply {
	if r, ok := x.needAdmin(); !ok {
		return r
	}
	if arg == "" {
		return x.fail("a database is required")
	}
	if r, ok := x.dbArg("ENABLE", arg, false, "disable"); !ok { // "disable": PgBouncer 1.18's text
		return r
	}
	x.p.setDisabled(arg, false)
	return ready("ENABLE")
}

func (p *Proxy) setDisabled(db string, on bool) {
	p.console.mu.Lock()
	defer p.console.mu.Unlock()
	if p.console.disabled == nil {
		p.console.disabled = map[string]bool{}
	}
	if on {
		p.console.disabled[db] = true
	} else {
		delete(p.console.disabled, db)
	}
}

// kill is KILL db: the database is paused, and its clients (FATAL
// "database removed") and servers closed at once.
func (x *consoleCmd) kill(arg string) consoleReply {
	if r, ok := x.needAdmin(); !ok {
		return r
	}
	if x.p.pausedAll() {
		return x.fail(ErrAlreadyPaused.Error())
	}
	if arg == "" {
		return x.fail("a database is required")
	}
	if r, ok := x.dbArg("KILL", arg, true, "kill"); !ok {
		return r
	}
	if !x.p.Kill(arg) {
		return consoleReply{close: true}
	}
	return ready("KILL")
}

// Kill is the console's KILL db: database db is paused (until RESUME db),
// its clients get FATAL "database removed" and are closed, and its servers
// are closed, mid-transaction or not. False if the proxy has stopped.
func (p *Proxy) Kill(db string) bool {
	if !p.running() {
		return false
	}
	return p.loop.call(func() {
		ps := &p.pause
		if ps.dbs == nil {
			ps.dbs = map[string]struct{}{}
		}
		ps.dbs[db] = struct{}{}
		for _, c := range p.clientList() {
			if c.adopted && !c.gone && c.pool != nil && c.pool.key.db == db {
				c.fatalClose(poolerError("database removed"))
			}
		}
		for _, pl := range p.loopPools {
			if pl.key.db != db {
				continue
			}
			for _, s := range pl.allServers() {
				pl.closeServer(s, "database removed")
			}
		}
		p.pauseProgress()
	})
}

// waitClose is WAIT_CLOSE [db]: the answer waits until no server of the
// database (of any database) is marked to close (RECONNECT, a reload
// that changed its connection settings).
func (x *consoleCmd) waitClose(arg string) consoleReply {
	if r, ok := x.needAdmin(); !ok {
		return r
	}
	if r, ok := x.dbArg("WAIT_CLOSE", arg, true, "wait in"); !ok {
		return r
	}
	// PgBouncer checks at each turn of its loop; the console polls the loop.
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for {
		left := 0
		if !x.p.loop.call(func() {
			for _, pl := range x.p.loopPools {
				if arg != "" && pl.key.db != arg {
					continue
				}
				for s := range pl.servers {
					if s.closeNeeded {
						left++
					}
				}
			}
		}) {
			return consoleReply{close: true}
		}
		if left == 0 {
			return ready("WAIT_CLOSE")
		}
		select {
		case <-t.C:
		case <-x.p.stopping:
			return consoleReply{close: true}
		}
	}
}

// shutdown is SHUTDOWN: the proxy stops at once (PgBouncer 1.18 exits);
// the console connection closes without an answer.
func (x *consoleCmd) shutdown(arg string) consoleReply {
	if arg != "" {
		return x.syntaxError()
	}
	if r, ok := x.needAdmin(); !ok {
		return r
	}
	x.p.logf("SHUTDOWN command issued")
	x.p.loop.call(func() {
		if x.p.pause.suspend && len(x.p.handover.socks)+len(x.p.handover.unix) > 0 {
			// An online restart: the new process holds these now.
			x.p.dropHandedOver("taken over by the new process")
		}
	})
	x.p.Shutdown(ImmediateShutdown)
	return consoleReply{close: true}
}

// suspend is SUSPEND. See Suspend.
func (x *consoleCmd) suspend(arg string) consoleReply {
	if arg != "" {
		return x.syntaxError()
	}
	if r, ok := x.needAdmin(); !ok {
		return r
	}
	done, err := x.p.Suspend()
	switch {
	case errors.Is(err, ErrAlreadyPaused), errors.Is(err, ErrPausedDatabases):
		return x.fail(err.Error())
	case err != nil:
		return consoleReply{close: true}
	}
	x.p.logf("SUSPEND command issued")
	select {
	case <-done:
		return ready("SUSPEND")
	case <-x.p.stopping:
		return consoleReply{close: true}
	}
}
