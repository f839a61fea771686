package system

import (
	"math"

	"github.com/poolsim/poolsim/sim"
)

// server is PostgreSQL: backend slots, backend start-up, and the CPU that
// running statements share.
type server struct {
	cfg      Server
	startup  *sim.Resource // start-up workers (connect_concurrency); ids are connections or pools' login ids
	backends int           // open backends, each holding a max_connections slot
	open     sim.Level     // open backends over time (memory)
	busy     sim.Level     // direct mode: backends in use by a client

	running []cpuJob  // statements in their CPU phase, in arrival order
	last    sim.Time  // when their work left was last brought up to date
	gen     int64     // generation of the pending CPU-done event
	jobs    sim.Level // statements in their CPU phase
	cores   sim.Level // cores in use, min(jobs, cores)
}

// cpuJob is a running statement's (or a backend start-up's) CPU work
// left, in nanoseconds.
type cpuJob struct {
	conn    int32 // the connection, or a pool's login id (negative)
	startup bool  // a backend starting, not a statement
	left    float64
}

func (v *server) init(cfg Server) {
	v.cfg = cfg
	v.startup = sim.NewResource(0, cfg.ConnectConcurrency)
	v.open, v.busy, v.jobs, v.cores = sim.NewLevel(0), sim.NewLevel(0), sim.NewLevel(0), sim.NewLevel(0)
}

func (v *server) openBackend(now sim.Time) {
	v.backends++
	v.open.Set(now, int64(v.backends))
}

func (v *server) closeBackend(now sim.Time) {
	v.backends--
	v.open.Set(now, int64(v.backends))
}

// rate is the CPU work each of n running statements receives per unit of
// time: its share of the cores, slowed by the Universal Scalability Law's
// contention (σ) and coherency (κ) terms.
func (v *server) rate(n int) float64 {
	share := 1.0
	if n > v.cfg.Cores {
		share = float64(v.cfg.Cores) / float64(n)
	}
	k := float64(n)
	return share / (1 + v.cfg.Contention*(k-1) + v.cfg.Coherency*k*(k-1))
}

// advance brings the running statements' work left up to now.
func (v *server) advance(now sim.Time) {
	if n := len(v.running); n > 0 && now > v.last {
		done := float64(now-v.last) * v.rate(n)
		for i := range v.running {
			v.running[i].left -= done
		}
	}
	v.last = now
}

func (v *server) count(now sim.Time) {
	n := int64(len(v.running))
	v.jobs.Set(now, n)
	v.cores.Set(now, min(n, int64(v.cfg.Cores)))
}

// reschedule plans the CPU-done event of the statement that will finish
// first at the current rate; earlier plans are void (generation).
func (v *server) reschedule(s *sim.Sim) {
	v.gen++
	n := len(v.running)
	if n == 0 {
		return
	}
	least := v.running[0].left
	for _, j := range v.running[1:] {
		least = min(least, j.left)
	}
	dt := sim.Time(math.Ceil(max(least, 0) / v.rate(n)))
	s.After(dt, evCPUDone, 0, v.gen)
}

// startBackend runs a backend's start-up: on a CPU server it is CPU work
// shared with the running statements (PostgreSQL forks and initialises a
// process: measured, about 20 ms one at a time and 10 ms each in a storm on
// 2 cores); otherwise a fixed delay.
func (m *model) startBackend(s *sim.Sim, c int32) {
	d := m.cfg.Server.Connect.Sample(m.connect)
	v := &m.srv
	if d > 0 && v.cfg.Cores > 0 {
		now := s.Now()
		v.advance(now)
		v.running = append(v.running, cpuJob{conn: c, startup: true, left: float64(d)})
		v.count(now)
		v.reschedule(s)
		return
	}
	s.After(d, evStartupDone, c, 0)
}

// execute runs connection c's statement at the server: first its CPU time
// (shared by the cores when the server models them), then its fixed part.
func (m *model) execute(s *sim.Sim, c int32) {
	cn := &m.conns[c]
	w := m.wl(cn.user)
	cn.cpuDemand = m.draw(w.CPU, m.cpu, cn.user)
	cn.fixed = m.draw(w.Query, m.query, cn.user)
	if m.trace != nil {
		k := m.users[cn.user].session
		m.trace[k] = append(m.trace[k], cn.fixed)
	}
	m.execStart(s.Now(), cn.cls)
	v := &m.srv
	if parse, fail := m.parseCost(c); fail {
		// ERROR: prepared statement does not exist; the transaction ends.
		m.users[cn.user].txnFailed = true
		cn.cpuDemand, cn.fixed = 0, 0
	} else if v.cfg.Cores > 0 {
		cn.cpuDemand += parse // parsing and planning is CPU work
	} else {
		cn.fixed += parse
	}
	if cn.cpuDemand > 0 && v.cfg.Cores > 0 {
		now := s.Now()
		v.advance(now)
		cn.cpuStart = now
		v.running = append(v.running, cpuJob{conn: c, left: float64(cn.cpuDemand)})
		v.count(now)
		v.reschedule(s)
		return
	}
	m.users[cn.user].part.service += cn.cpuDemand + cn.fixed
	s.After(cn.cpuDemand+cn.fixed, evFixedDone, c, 0)
}

// cpuDone finishes the statements whose CPU work is done and moves them
// on to their fixed part.
func (m *model) cpuDone(s *sim.Sim, gen int64) {
	v := &m.srv
	if gen != v.gen {
		return // a plan made void by a later arrival
	}
	now := s.Now()
	m.end = now
	v.advance(now)
	var finished []cpuJob
	kept := v.running[:0]
	for _, j := range v.running {
		if j.left <= 0.5 { // within half a nanosecond: done
			finished = append(finished, j)
		} else {
			kept = append(kept, j)
		}
	}
	v.running = kept
	v.count(now)
	v.reschedule(s)
	for _, j := range finished {
		c := j.conn
		if j.startup {
			m.startupDone(s, c)
			continue
		}
		cn := &m.conns[c]
		p := &m.users[cn.user].part
		p.cpuQueue += now - cn.cpuStart - cn.cpuDemand
		p.service += cn.cpuDemand + cn.fixed
		if cn.fixed > 0 {
			s.After(cn.fixed, evFixedDone, c, 0)
		} else {
			m.statementDone(s, c)
		}
	}
}
