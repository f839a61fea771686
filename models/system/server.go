package system

import "github.com/poolsim/poolsim/sim"

// server is PostgreSQL: backend slots and backend start-up. The CPU that
// running statements share is the run's CPU (machine.go, ps.go).
type server struct {
	cfg      Server
	startup  *sim.Resource // start-up workers (connect_concurrency); ids are connections or pools' login ids
	backends int           // open backends, each holding a max_connections slot
	open     sim.Level     // open backends over time (memory)
	busy     sim.Level     // direct mode: backends in use by a client
}

func (v *server) init(cfg Server) {
	v.cfg = cfg
	v.startup = sim.NewResource(0, cfg.ConnectConcurrency)
	v.open, v.busy = sim.NewLevel(0), sim.NewLevel(0)
}

func (v *server) openBackend(now sim.Time) {
	v.backends++
	v.open.Set(now, int64(v.backends))
}

func (v *server) closeBackend(now sim.Time) {
	v.backends--
	v.open.Set(now, int64(v.backends))
}

// runJob starts a job on the run's CPU: a port's, or the built-in
// processor sharing (called directly, not through the interface, where no
// port is set). For a statement it returns the work after which its
// result goes.
func (m *model) runJob(j Job) sim.Time {
	if m.port != nil {
		return m.port.Run(j)
	}
	return m.ps.Run(j)
}

// startBackend runs a backend's start-up: on a CPU server it is CPU work
// shared with the running statements (PostgreSQL forks and initialises a
// process: measured, about 20 ms one at a time and 10 ms each in a storm on
// 2 cores); otherwise a fixed delay.
func (m *model) startBackend(s *sim.Sim, c int32) {
	d := m.cfg.Server.Connect.Sample(m.connect)
	v := &m.srv
	if d > 0 && v.cfg.Cores > 0 {
		m.runJob(Job{Kind: JobStartup, ID: c, Server: -1, Work: d})
		return
	}
	s.After(d, evStartupDone, c, 0)
}

// execute runs connection c's statement at the server: first its CPU time
// (shared by the cores when the server models them), then its fixed part.
func (m *model) execute(s *sim.Sim, c int32) {
	cn := &m.conns[c]
	w := m.wl(cn.user)
	cn.cpuDemand = m.draw(&w.CPU, m.cpu, cn.user)
	cn.fixed = m.draw(&w.Query, m.query, cn.user)
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
		cn.cpuStart = s.Now()
		// A port's backend may send the result before its work is all
		// done: the client's statement is the part before.
		cn.cpuDemand = m.runJob(Job{Kind: JobStatement, ID: c, Server: cn.server, Work: cn.cpuDemand})
		return
	}
	m.users[cn.user].part.service += cn.cpuDemand + cn.fixed
	s.After(cn.cpuDemand+cn.fixed, evFixedDone, c, 0)
}

// cpuDone is the moment the run's CPU planned (Host.Plan): the jobs
// whose work is done move on.
func (m *model) cpuDone(s *sim.Sim, gen int64) {
	if gen != m.cpuGen {
		return // a plan made void by a later one
	}
	m.end = s.Now()
	if m.port != nil {
		m.port.Tick()
		return
	}
	m.ps.Tick()
}

// finish moves a job whose CPU work is done on: a start-up, the pooler's
// work, or a statement to its fixed part.
func (m *model) finish(s *sim.Sim, j Job) {
	c := j.ID
	switch j.Kind {
	case JobStartup:
		m.startupDone(s, c)
		return
	case JobPooler:
		m.threadDone(s, int(c))
		return
	}
	now := s.Now()
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
