// Command speedref is the events-per-second reference of
// bench/model-speed.sh: the speed scenario (closed clients running
// transactions of statements through a transaction pooler with a fixed
// number of servers) written as a minimal handler over the same engine
// (package sim), with none of the model's generality - no classes, no
// application pool, no distributions, no statistics beyond a count and a
// sum. It schedules the same events in the same order as poolsim's model
// (a hop to the pooler, the statement at the server, a hop back, the think
// time; servers opened on demand one login at a time; a query_wait_timeout
// event per wait), so it prints the same events, transactions and virtual
// time, and the difference in wall time is the model's overhead over the
// bare engine.
//
//	go run ./bench/speedref [-clients 200] [-txns 500] [-stmts 6] [-query 300us] [-think 800us] [-hop 25us] [-pool 20]
package main

import (
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/poolsim/poolsim/sim"
)

const (
	evSession int32 = iota
	evStartupDone
	evSend
	evAtPooler
	evFixedDone
	evRecv
	evWaitTimeout
)

type client struct {
	stmt, txn int
	server    int32 // -1 when none
	waitNo    int64
	txnStart  sim.Time
}

type ref struct {
	stmts, txns           int
	query, think, hop     sim.Time
	timeout, janitor      sim.Time
	pool                  int
	clients               []client
	idle                  []int32
	waitQ                 []int32 // FIFO of waiting clients
	waitSince             []sim.Time
	waitHead              int
	servers               int
	loggingIn             bool
	nextServer            int32
	waitNo                int64
	ok                    int64
	latSum                float64
	lastTxn               sim.Time
	timedOut              int64
	stmtsDone, assignment int64
}

func (r *ref) Handle(s *sim.Sim, e sim.Event) {
	switch e.Kind {
	case evSession, evSend:
		r.send(s, e.ID)
	case evAtPooler:
		r.atPooler(s, e.ID)
	case evStartupDone:
		r.loginDone(s)
	case evFixedDone:
		r.statementDone(s, e.ID)
	case evRecv:
		r.recv(s, e.ID)
	case evWaitTimeout:
		if r.clients[e.ID].waitNo == e.Arg {
			r.timedOut++ // the speed scenario never waits this long
		}
	}
}

func (r *ref) send(s *sim.Sim, u int32) {
	c := &r.clients[u]
	if c.stmt == 0 {
		c.txnStart = s.Now()
	}
	s.After(r.hop, evAtPooler, u, 0)
}

func (r *ref) atPooler(s *sim.Sim, u int32) {
	c := &r.clients[u]
	if c.server >= 0 {
		r.execute(s, u)
		return
	}
	if n := len(r.idle); n > 0 {
		srv := r.idle[n-1]
		r.idle = r.idle[:n-1]
		r.assign(s, u, srv)
		return
	}
	r.waitQ = append(r.waitQ, u)
	r.waitSince = append(r.waitSince, s.Now())
	r.waitNo++
	c.waitNo = r.waitNo
	due := s.Now() + r.timeout
	s.At((due/r.janitor+1)*r.janitor, evWaitTimeout, u, c.waitNo)
	r.grow(s)
}

// grow opens one more server while clients wait: one login at a time,
// answered at once (connect: 0s).
func (r *ref) grow(s *sim.Sim) {
	if r.loggingIn || r.waitHead == len(r.waitQ) || r.servers >= r.pool {
		return
	}
	r.loggingIn = true
	r.servers++
	s.After(0, evStartupDone, -1, 0)
}

func (r *ref) loginDone(s *sim.Sim) {
	r.loggingIn = false
	srv := r.nextServer
	r.nextServer++
	r.release(s, srv)
	r.grow(s)
}

// release gives srv to the oldest waiter, or makes it idle.
func (r *ref) release(s *sim.Sim, srv int32) {
	if r.waitHead < len(r.waitQ) {
		u := r.waitQ[r.waitHead]
		r.waitHead++
		if r.waitHead > 1024 && 2*r.waitHead > len(r.waitQ) {
			n := copy(r.waitQ, r.waitQ[r.waitHead:])
			copy(r.waitSince, r.waitSince[r.waitHead:])
			r.waitQ, r.waitSince, r.waitHead = r.waitQ[:n], r.waitSince[:n], 0
		}
		r.assign(s, u, srv)
		return
	}
	r.idle = append(r.idle, srv)
}

func (r *ref) assign(s *sim.Sim, u, srv int32) {
	c := &r.clients[u]
	c.server, c.waitNo = srv, 0
	r.assignment++
	r.execute(s, u)
}

func (r *ref) execute(s *sim.Sim, u int32) { s.After(r.query, evFixedDone, u, 0) }

// statementDone releases the server after a transaction's last statement
// (transaction pooling) and sends the result back over the hop.
func (r *ref) statementDone(s *sim.Sim, u int32) {
	c := &r.clients[u]
	r.stmtsDone++
	if c.stmt == r.stmts-1 {
		srv := c.server
		c.server = -1
		r.release(s, srv)
	}
	s.After(r.hop, evRecv, u, 0)
}

func (r *ref) recv(s *sim.Sim, u int32) {
	c := &r.clients[u]
	c.stmt++
	if c.stmt == r.stmts {
		r.ok++
		r.latSum += float64(s.Now() - c.txnStart)
		r.lastTxn = s.Now()
		c.stmt = 0
		c.txn++
		if c.txn == r.txns {
			return
		}
	}
	s.After(r.think, evSend, u, 0)
}

func main() {
	fs := flag.NewFlagSet("speedref", flag.ContinueOnError)
	clients := fs.Int("clients", 200, "closed clients")
	txns := fs.Int("txns", 500, "transactions per client")
	stmts := fs.Int("stmts", 6, "statements per transaction")
	query := fs.Duration("query", 300*time.Microsecond, "server time per statement")
	think := fs.Duration("think", 800*time.Microsecond, "client time after each statement")
	hop := fs.Duration("hop", 25*time.Microsecond, "one-way client<->pooler latency")
	pool := fs.Int("pool", 20, "servers")
	if err := fs.Parse(os.Args[1:]); err != nil {
		os.Exit(2)
	}
	if *clients < 1 || *txns < 1 || *stmts < 1 || *pool < 1 || *query < 0 || *think < 0 || *hop <= 0 {
		fmt.Fprintln(os.Stderr, "speedref: want clients, txns, stmts and pool of at least 1, query and think not negative, hop above 0")
		os.Exit(2)
	}
	start := time.Now()
	r := &ref{
		stmts: *stmts, txns: *txns, pool: *pool,
		query: sim.Time(*query), think: sim.Time(*think), hop: sim.Time(*hop),
		timeout: 120 * sim.Second, janitor: 333333 * sim.Microsecond, // PgBouncer's janitor, as the model has it
		clients: make([]client, *clients),
	}
	var s sim.Sim
	for i := range r.clients {
		r.clients[i].server = -1
		s.At(0, evSession, int32(i), 0)
	}
	s.Run(r)
	took := time.Since(start)
	wall := r.lastTxn
	fmt.Printf("speedref: %d events, %d transactions, wall %.3f ms, tps %.1f, mean %.5f ms, %d timeouts; %.3f s, %.1f M events/s\n",
		s.Handled(), r.ok, wall.Milliseconds(), float64(r.ok)/wall.Seconds(), r.latSum/float64(r.ok)/1e6, r.timedOut,
		took.Seconds(), float64(s.Handled())/took.Seconds()/1e6)
}
