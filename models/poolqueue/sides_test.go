package poolqueue

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// The two users of Queue call it in their own patterns: the model
// (models/system/pooler.go) with int32 ids, a grow after each arrival and
// login, and one timer per waiter that lands on a janitor tick; the proxy
// (proxy/pooler/pool.go) with pointers, a release loop that may skip a
// client that left, launches gated by CanLaunch, and a janitor that
// expires the head of the queue and launches on each tick. modelSide and
// proxySide below transcribe those call patterns; TestSidesAgree plays
// the same events through both and compares who got which server, who
// failed and who timed out, and when. The per-side policies that are not
// queueing rules are held equal: no max_db_connections budgets, and a
// refused login stops the pool's growth on both sides (the model's full,
// the proxy's server_login_retry made infinite). Once a refused login has
// failed the waiters of a pool with no server the sides part ways on
// purpose (the proxy refuses new clients at once, check_fast_fail; the
// model lets them wait), so the events stop there.

const (
	waitTimeout = 250 // query_wait_timeout
	tickEvery   = 100 // the janitor's period (pooler.timeout_check)
)

// event is one step: a client arrives ('a'), the k-th client holding a
// server (in arrival order) lets it go ('r'), the login in flight
// completes ('o') or is refused with an error ('f'). Times are never
// multiples of tickEvery, so ticks and events never tie.
type event struct {
	at   int64
	kind byte
	k    int
}

// side is one call pattern; log collects what it decided.
type side interface {
	play(e event)
	finish(at int64)
	log() []string
}

type modelSide struct {
	q       Queue[int32, int32]
	size    int
	full    bool
	ended   bool  // a refused login failed the waiters
	next    int32 // next client id
	servers int32 // servers logged in so far: the next one's id
	holding []int32
	server  map[int32]int32
	waitNo  map[int32]int64
	timers  []timer
	nwait   int64
	out     []string
}

type timer struct {
	at     int64
	c      int32
	waitNo int64
}

func newModelSide(size int) *modelSide {
	return &modelSide{size: size, server: map[int32]int32{}, waitNo: map[int32]int64{}}
}

func (m *modelSide) log() []string { return m.out }

func (m *modelSide) play(e event) {
	m.timersUpTo(e.at)
	if m.ended {
		return
	}
	switch e.kind {
	case 'a': // atPooler
		c := m.next
		m.next++
		if s, ok := m.q.Arrive(c, e.at); ok {
			m.assign(e.at, c, s)
			return
		}
		m.nwait++
		m.waitNo[c] = m.nwait
		due := e.at + waitTimeout
		m.timers = append(m.timers, timer{(due/tickEvery + 1) * tickEvery, c, m.nwait})
		m.grow()
	case 'r': // statementDone: Release
		if e.k < len(m.holding) {
			c := m.holding[e.k]
			m.holding = slices.Delete(m.holding, e.k, e.k+1)
			m.release(e.at, m.server[c])
		}
	case 'o': // loginDone
		if m.q.LoggingIn() {
			m.q.LoginDone()
			s := m.servers
			m.servers++
			m.release(e.at, s)
			m.grow()
		}
	case 'f': // loginRefused
		if m.q.LoggingIn() {
			fail := m.q.LoginFailed(true)
			m.full, m.ended = true, fail
			for fail {
				c, _, ok := m.q.Next()
				if !ok {
					break
				}
				m.waitNo[c] = 0
				m.out = append(m.out, fmt.Sprintf("%d: c%d failed", e.at, c))
			}
		}
	}
}

func (m *modelSide) finish(at int64) { m.timersUpTo(at) }

// timersUpTo runs the query_wait_timeout timers due by at, in the order
// they were set (the simulator's order for events of one kind at one
// instant).
func (m *modelSide) timersUpTo(at int64) {
	slices.SortStableFunc(m.timers, func(a, b timer) int { return int(a.at - b.at) })
	for len(m.timers) > 0 && m.timers[0].at <= at {
		t := m.timers[0]
		m.timers = m.timers[1:]
		if m.waitNo[t.c] != t.waitNo {
			continue // served in time
		}
		if _, ok := m.q.Remove(t.c); !ok {
			panic("timed-out client not waiting")
		}
		m.waitNo[t.c] = 0
		m.out = append(m.out, fmt.Sprintf("%d: c%d timed out", t.at, t.c))
	}
}

func (m *modelSide) grow() {
	if m.full || !m.q.NeedLaunch(m.size) {
		return
	}
	m.q.Launch()
}

func (m *modelSide) release(at int64, s int32) {
	if c, _, ok := m.q.Release(s); ok {
		m.assign(at, c, s)
	}
}

func (m *modelSide) assign(at int64, c, s int32) {
	m.waitNo[c] = 0
	m.server[c] = s
	m.holding = append(m.holding, c)
	slices.Sort(m.holding) // arrival order: ids are given in arrival order
	m.out = append(m.out, fmt.Sprintf("%d: c%d got s%d", at, c, s))
}

type proxySide struct {
	q            Queue[*pclient, *pserver]
	size         int
	loginFailing bool
	next, nsrv   int
	holding      []*pclient
	nextTick     int64
	ended        bool // a refused login failed the waiters
	out          []string
}

type pclient struct {
	id     int
	queued bool
	server *pserver
}

type pserver struct{ id int }

func newProxySide(size int) *proxySide { return &proxySide{size: size, nextTick: tickEvery} }

func (p *proxySide) log() []string { return p.out }

func (p *proxySide) play(e event) {
	p.ticksUpTo(e.at)
	if p.ended {
		return
	}
	switch e.kind {
	case 'a': // client.step: failingFast, then pool.arrive
		c := &pclient{id: p.next}
		p.next++
		if p.failingFast() {
			p.out = append(p.out, fmt.Sprintf("%d: c%d refused at once", e.at, c.id))
			return
		}
		if s, ok := p.q.Arrive(c, e.at); ok {
			p.assign(e.at, c, s)
			return
		}
		c.queued = true
		p.launch()
	case 'r':
		if e.k < len(p.holding) {
			c := p.holding[e.k]
			p.holding = slices.Delete(p.holding, e.k, e.k+1)
			p.release(e.at, c.server)
		}
	case 'o': // loggedIn
		if p.q.LoggingIn() {
			p.q.LoginDone()
			p.loginFailing = false
			s := &pserver{id: p.nsrv}
			p.nsrv++
			p.release(e.at, s)
			p.launch()
		}
	case 'f': // loginFailed with a PostgreSQL error
		if p.q.LoggingIn() {
			fail := p.q.LoginFailed(true)
			p.loginFailing, p.ended = true, fail
			for fail {
				c, _, ok := p.q.Next()
				if !ok {
					break
				}
				c.queued = false
				p.out = append(p.out, fmt.Sprintf("%d: c%d failed", e.at, c.id))
			}
		}
	}
}

func (p *proxySide) finish(at int64) { p.ticksUpTo(at) }

// ticksUpTo runs the janitor's ticks due by at: expire, then launch.
func (p *proxySide) ticksUpTo(at int64) {
	for ; p.nextTick <= at; p.nextTick += tickEvery {
		for {
			c, ok := p.q.Expire(p.nextTick - waitTimeout)
			if !ok {
				break
			}
			c.queued = false
			p.out = append(p.out, fmt.Sprintf("%d: c%d timed out", p.nextTick, c.id))
		}
		p.launch()
	}
}

func (p *proxySide) failingFast() bool {
	servers := p.q.Servers()
	if p.q.LoggingIn() {
		servers--
	}
	return p.loginFailing && servers == 0
}

func (p *proxySide) launch() {
	if p.q.Waiting() > 0 {
		p.start()
	}
}

// start holds logins back after a failure for ever (server_login_retry
// made infinite, as the model's full).
func (p *proxySide) start() {
	if !p.q.CanLaunch(p.size) || p.loginFailing {
		return
	}
	p.q.Launch()
}

func (p *proxySide) release(at int64, s *pserver) {
	for {
		c, _, handed := p.q.Release(s)
		if !handed {
			return
		}
		if c.queued { // handOver
			c.queued = false
			p.assign(at, c, s)
			return
		}
	}
}

func (p *proxySide) assign(at int64, c *pclient, s *pserver) {
	c.server = s
	p.holding = append(p.holding, c)
	slices.SortFunc(p.holding, func(a, b *pclient) int { return a.id - b.id })
	p.out = append(p.out, fmt.Sprintf("%d: c%d got s%d", at, c.id, s.id))
}

// play runs events through a side and returns its log.
func play(s side, events []event) []string {
	for _, e := range events {
		s.play(e)
	}
	s.finish(events[len(events)-1].at + 10*waitTimeout)
	return s.log()
}

// randomEvents draws n events.
func randomEvents(r *rand.Rand, n int) []event {
	var evs []event
	at := int64(1)
	for range n {
		at += 10 * int64(1+r.IntN(8))
		if at%tickEvery == 0 {
			at += 10
		}
		e := event{at: at}
		switch x := r.IntN(10); {
		case x < 4:
			e.kind = 'a'
		case x < 7:
			e.kind, e.k = 'r', r.IntN(3)
		case x < 9:
			e.kind = 'o'
		default:
			e.kind = 'f'
		}
		evs = append(evs, e)
	}
	return evs
}

func parseEvents(s string) []event {
	var evs []event
	at := int64(1)
	for _, w := range strings.Fields(s) {
		at += 20
		e := event{at: at, kind: w[0]}
		if e.kind == 'r' {
			fmt.Sscan(w[1:], &e.k)
		}
		evs = append(evs, e)
	}
	return evs
}

func TestSidesAgree(t *testing.T) {
	fixed := []struct {
		name   string
		size   int
		events string
	}{
		{"serve in order, then reuse", 2, "a a a o o r0 r0 a r0 r0"},
		{"waiters time out in order while a login is slow", 1, "a a a a a a a a a a a a a o"},
		{"a refused first login fails the waiters", 3, "a a a f"},
		{"a refused login with a server open keeps them waiting", 3, "a o a a f r0 r0 a"},
	}
	for _, tt := range fixed {
		compare(t, tt.name, tt.size, parseEvents(tt.events))
	}
	r := rand.New(rand.NewPCG(16, 16))
	for i := range 300 {
		size := 1 + r.IntN(4)
		compare(t, fmt.Sprintf("random %d (size %d)", i, size), size, randomEvents(r, 20+r.IntN(100)))
	}
}

func compare(t *testing.T, name string, size int, events []event) {
	t.Helper()
	model := play(newModelSide(size), events)
	proxy := play(newProxySide(size), events)
	if !slices.Equal(model, proxy) {
		t.Errorf("%s: the model and the proxy disagree\nmodel: %s\nproxy: %s", name, strings.Join(model, "; "), strings.Join(proxy, "; "))
	}
	if len(model) == 0 {
		t.Errorf("%s: nothing happened", name)
	}
}
