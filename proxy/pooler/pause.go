package pooler

import (
	"errors"
	"time"
)

// PAUSE and RESUME, as PgBouncer has them (src/admin.c, src/janitor.c
// per_loop_pause): while a database (or the whole pooler) is paused, no
// client gets a server - a client that needs one waits in its pool's queue,
// query_wait_timeout still running - no server login starts, idle servers
// are closed and every server is closed when it is released. The pause is
// complete once the paused pools have no server left; a session-mode client
// keeps its server until it leaves, so completion can wait for it. RESUME
// lets the waiting clients have servers again.

// pauseState belongs to the loop.
type pauseState struct {
	on   bool                // everything is paused
	dbs  map[string]struct{} // databases paused one by one
	done []pauseWaiter       // Pause calls waiting for completion
}

type pauseWaiter struct {
	db string // "" = all
	ch chan struct{}
}

// Errors of Pause and Resume, with PgBouncer's console texts.
var (
	ErrAlreadyPaused = errors.New("already suspended/paused")
	ErrNotPaused     = errors.New("pooler is not paused/suspended")
)

// paused reports whether the pool may not get servers.
func (p *pool) paused() bool {
	ps := &p.px.pause
	if ps.on {
		return true
	}
	_, ok := ps.dbs[p.key.db]
	return ok
}

// Pause pauses database db ("" = every database): when it returns without
// error the pause is in force, and the channel is closed once the paused
// pools have no server left. The pause lasts until Resume.
func (p *Proxy) Pause(db string) (<-chan struct{}, error) {
	ch := make(chan struct{})
	var err error
	ok := p.loop.call(func() {
		ps := &p.pause
		if _, dup := ps.dbs[db]; ps.on || dup {
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
				pl.closeIdle(time.Time{}, 0, "pooler paused")
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

// Resume ends a pause of db ("" = the pause of everything, or of every
// database).
func (p *Proxy) Resume(db string) error {
	var err error
	ok := p.loop.call(func() {
		ps := &p.pause
		switch {
		case db == "" && (ps.on || len(ps.dbs) > 0):
			ps.on, ps.dbs = false, nil
		case db != "" && !ps.on:
			if _, ok := ps.dbs[db]; !ok {
				err = ErrNotPaused
				return
			}
			delete(ps.dbs, db)
		default:
			err = ErrNotPaused
			return
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
	return err
}

// pauseProgress wakes the Pause calls whose databases have no servers
// left, or are no longer paused. It runs on the loop.
func (p *Proxy) pauseProgress() {
	ps := &p.pause
	kept := ps.done[:0]
	for _, w := range ps.done {
		left := 0
		for _, pl := range p.loopPools {
			if (w.db == "" || pl.key.db == w.db) && pl.paused() {
				left += pl.nservers
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
