package pooler

import (
	"errors"
	"fmt"
	"time"
)

// PAUSE, RESUME and SUSPEND, as PgBouncer 1.18 has them (src/admin.c,
// src/janitor.c per_loop_pause and per_loop_suspend).
//
// While a database (or the whole pooler) is paused, no client gets a
// server - a client that needs one waits in its pool's queue,
// query_wait_timeout still running - no server login starts, idle servers
// are closed and every server is closed when it is released. The pause is
// complete once the paused pools have no server left; a session-mode client
// keeps its server until it leaves, so completion can wait for it. RESUME
// lets the waiting clients have servers again. The pause of everything and
// the pauses of single databases are separate, as in PgBouncer: RESUME
// without a database ends only the former.
//
// SUSPEND stops reading every client and server connection once it has
// nothing buffered either way (PgBouncer flushes and stops its sockets for
// an online restart); it is complete when every connection is so, or after
// suspendTimeout, when the connections that are still busy are closed.
// RESUME, or the last console connection leaving, reads them again.

// pauseState belongs to the loop.
type pauseState struct {
	on   bool                // everything is paused
	dbs  map[string]struct{} // databases paused one by one
	done []pauseWaiter       // Pause calls waiting for completion

	suspend      bool          // SUSPEND is in force
	suspendStart time.Time     // when it began, for suspendTimeout
	suspendDone  chan struct{} // closed once every connection is suspended; nil after
}

type pauseWaiter struct {
	db string // "" = all
	ch chan struct{}
}

// Errors of Pause, Resume and Suspend, with PgBouncer's console texts.
var (
	ErrAlreadyPaused   = errors.New("already suspended/paused")
	ErrNotPaused       = errors.New("pooler is not paused/suspended")
	ErrDBNotPaused     = errors.New("database is not paused") // wrapped with the name: "database db1 is not paused"
	ErrPausedDatabases = errors.New("cannot suspend with paused databases")
)

// suspendTimeout is PgBouncer 1.18's default suspend_timeout.
const suspendTimeout = 10 * time.Second

// paused reports whether the pool may not get servers.
func (p *pool) paused() bool {
	ps := &p.px.pause
	if ps.on {
		return true
	}
	_, ok := ps.dbs[p.key.db]
	return ok
}

// pausedAll reports whether everything is paused or suspended
// (PgBouncer's cf_pause_mode). It runs off the loop.
func (p *Proxy) pausedAll() bool {
	var on bool
	p.loop.call(func() { on = p.pause.on || p.pause.suspend })
	return on
}

// Pause pauses database db ("" = every database): when it returns without
// error the pause is in force, and the channel is closed once the paused
// pools have no server left. The pause lasts until Resume. Pausing a
// database again is allowed; pausing while everything is paused or
// suspended is ErrAlreadyPaused.
func (p *Proxy) Pause(db string) (<-chan struct{}, error) {
	if !p.running() {
		return nil, ErrNotServing
	}
	ch := make(chan struct{})
	var err error
	ok := p.loop.call(func() {
		ps := &p.pause
		if ps.on || ps.suspend {
			err = ErrAlreadyPaused
			return
		}
		if db == "" {
			ps.on = true
		} else {
			if ps.dbs == nil {
				ps.dbs = map[string]struct{}{}
			}
			ps.dbs[db] = struct{}{}
		}
		for _, pl := range p.loopPools {
			if pl.paused() {
				pl.closeIdle(time.Time{}, 0, "pause mode")
			}
		}
		ps.done = append(ps.done, pauseWaiter{db, ch})
		p.pauseProgress()
	})
	if !ok {
		return nil, errShuttingDown
	}
	if err != nil {
		return nil, err
	}
	return ch, nil
}

// Resume ends the pause (or suspension) of everything when db is "", else
// the pause of database db: ErrNotPaused, or ErrDBNotPaused wrapped with
// the name, when there is none.
func (p *Proxy) Resume(db string) error {
	if !p.running() {
		return ErrNotServing
	}
	var err error
	ok := p.loop.call(func() {
		ps := &p.pause
		switch {
		case db == "" && ps.suspend:
			p.resumeAll()
		case db == "" && ps.on:
			ps.on = false
		case db == "":
			err = ErrNotPaused
			return
		default:
			if _, ok := ps.dbs[db]; !ok {
				err = fmt.Errorf("database %s is not paused: %w", db, ErrDBNotPaused)
				return
			}
			delete(ps.dbs, db)
		}
		for _, pl := range p.loopPools {
			if !pl.paused() {
				pl.launch()
			}
		}
		p.pauseProgress() // a Pause still waiting has been overtaken
	})
	if !ok {
		return errShuttingDown
	}
	if errors.Is(err, ErrDBNotPaused) {
		// The console's text is PgBouncer's.
		return &consoleTextError{text: fmt.Sprintf("database %s is not paused", db), err: err}
	}
	return err
}

// consoleTextError is an error whose text is PgBouncer's console message.
type consoleTextError struct {
	text string
	err  error
}

func (e *consoleTextError) Error() string { return e.text }
func (e *consoleTextError) Unwrap() error { return e.err }

// pauseProgress wakes the Pause calls whose databases have no servers
// left, or are no longer paused. It runs on the loop.
func (p *Proxy) pauseProgress() {
	ps := &p.pause
	kept := ps.done[:0]
	for _, w := range ps.done {
		left := 0
		for _, pl := range p.loopPools {
			if (w.db == "" || pl.key.db == w.db) && pl.paused() {
				left += pl.queue.Servers()
			}
		}
		if left == 0 {
			close(w.ch)
			continue
		}
		kept = append(kept, w)
	}
	clear(ps.done[len(kept):])
	ps.done = kept
}

// Suspend is the console's SUSPEND: every client and server connection
// stops being read once nothing is buffered for it either way. The channel
// is closed when all are (or suspendTimeout has passed and the busy ones
// have been closed); Resume("") reads them again.
func (p *Proxy) Suspend() (<-chan struct{}, error) {
	if !p.running() {
		return nil, ErrNotServing
	}
	ch := make(chan struct{})
	var err error
	ok := p.loop.call(func() {
		ps := &p.pause
		switch {
		case ps.on || ps.suspend:
			err = ErrAlreadyPaused
		case len(ps.dbs) > 0:
			err = ErrPausedDatabases
		default:
			ps.suspend, ps.suspendStart, ps.suspendDone = true, p.loop.now, ch
			p.pauseAccept()
			p.suspendProgress(p.loop.now)
		}
	})
	if !ok {
		return nil, errShuttingDown
	}
	if err != nil {
		return nil, err
	}
	return ch, nil
}

// quiet reports whether a connection can be suspended: nothing read and
// not handled, no message half passed on, nothing to write.
func (sk *sock) quiet() bool {
	if sk.r != sk.w || sk.pending() > 0 {
		return false
	}
	switch {
	case sk.c != nil:
		return sk.c.fwdLeft == 0
	case sk.s != nil:
		return sk.s.fwdLeft == 0
	}
	return true
}

// suspended reports whether the loop must leave sk unread.
func (l *loop) suspended(sk *sock) bool {
	return l.px.pause.suspend && sk.quiet()
}

// suspendProgress completes a SUSPEND once every connection is quiet, or
// closes the busy ones after suspendTimeout. It runs on the loop after each
// batch of events.
func (p *Proxy) suspendProgress(now time.Time) {
	ps := &p.pause
	if !ps.suspend || ps.suspendDone == nil {
		return
	}
	force := now.Sub(ps.suspendStart) >= suspendTimeout
	busy := 0
	for _, sk := range p.loop.socks {
		if sk == nil || sk.closed || sk.quiet() {
			continue
		}
		if !force {
			busy++
			continue
		}
		switch {
		case sk.c != nil:
			sk.c.fatalClose(poolerError("suspend_timeout"))
		case sk.s != nil:
			sk.s.pool.closeServer(sk.s, "suspend_timeout")
		}
	}
	if busy == 0 {
		close(ps.suspendDone)
		ps.suspendDone = nil
	}
}

// resumeAll ends a SUSPEND: every connection is read again. It runs on the
// loop.
func (p *Proxy) resumeAll() {
	ps := &p.pause
	ps.suspend = false
	p.handover = handoverState{} // an online restart that did not finish
	p.resumeAccept()
	if ps.suspendDone != nil {
		close(ps.suspendDone) // a SUSPEND still waiting answers
		ps.suspendDone = nil
	}
	l := p.loop
	for _, sk := range l.socks {
		if sk == nil || sk.closed || !sk.more {
			continue
		}
		switch {
		case sk.c != nil:
			l.resume = append(l.resume, sk.c)
		case sk.s != nil:
			sk.s.input()
		}
	}
}

// consoleGone resumes a suspension when the last console connection has
// left, as PgBouncer does ("admin disappeared when suspended").
func (p *Proxy) consoleGone() {
	p.loop.post(func() {
		if p.pause.suspend && len(p.consoleList()) == 0 && !p.stopRequested() {
			p.logf("admin disappeared when suspended, doing RESUME")
			p.resumeAll()
		}
	})
}

// stopRequested reports whether Shutdown has been called (or shutdown has
// begun): after an online restart's SHUTDOWN nothing is resumed.
func (p *Proxy) stopRequested() bool {
	select {
	case <-p.stopReq:
		return true
	default:
		return p.stoppingNow()
	}
}
