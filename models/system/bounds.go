package system

import (
	"fmt"
	"math"
	"strings"

	"github.com/poolsim/poolsim/models/poolmode"
)

// The asymptotic bounds of a closed system (operational analysis): N
// clients cycle through a unit of work that takes at least R0 with nobody
// waiting and think Z between units, so throughput is at most N/(R0+Z);
// and no resource serves more than its capacity, so throughput is at most
// 1/D_max, D_max being the bottleneck's demand per unit. The unit is what
// actually cycles: a transaction when the workload has no request level
// (Think after every statement), a request of T transactions when it has
// one (App between its statements and transactions, Think only before
// each request). Throughput is counted in transactions either way.

// classBound is one closed class's bounds, per transaction.
type classBound struct {
	name    string
	clients int     // N: clients that can be connected at once
	request bool    // the unit is a request (else a transaction)
	txns    float64 // T: mean transactions per unit
	units   float64 // K: units per session
	r0, z   float64 // the unit's time with nobody waiting; the think time between units
	dPool   float64 // demand per transaction on its pool's servers (or the backends): hold / servers
	pool    string  // what those servers are, for the text
	dCPU    float64 // demand per transaction on the server's cores: CPU / cores (0 without cores)
}

// population is the bound N·T/(R0+Z) in transactions per second, for
// sessions that never end.
func (b classBound) population() float64 {
	return float64(b.clients) * b.txns / (b.r0 + b.z)
}

// finite is the population bound over a whole run of K units per client
// (tps = ok/wall): the wall runs from the first attempt to the last
// completion, so it holds each client's K units and only the K-1 think
// times between them (a request workload's think before its first request
// falls before the first attempt).
func (b classBound) finite() float64 {
	return float64(b.clients) * b.units * b.txns / (b.units*b.r0 + (b.units-1)*b.z)
}

// dMax is the class's bottleneck demand per transaction and its name.
func (b classBound) dMax() (float64, string) {
	if b.dCPU > b.dPool {
		return b.dCPU, "the server's CPU"
	}
	return b.dPool, b.pool
}

// hold is the mean time one assignment keeps a server under pool mode
// mode, and how many assignments a transaction makes. A transaction-mode
// server is held across the App pauses between its statements; a
// session-mode (or direct) server for the whole session, with its think
// times between requests.
func hold(c Config, w Workload, mode poolmode.Mode) (s, perTxn float64) {
	q := w.Query.MeanValue().Seconds() + w.CPU.MeanValue().Seconds()
	h := 0.0
	if mode.Pooled() {
		h = 2 * c.Pooler.Hop.Seconds()
	}
	a := w.AppPause().MeanValue().Seconds()
	n := float64(w.StmtsPerTxn)
	switch mode {
	case poolmode.Statement:
		return q, n
	case poolmode.Transaction:
		return n*q + (n-1)*(a+h), 1
	default: // session and direct hold the server for the whole session
		k, t := w.Requests()
		reqs, total := float64(k), float64(k)*t.MeanValue()
		stmts := total * n
		return stmts*q + (stmts-1)*h + (reqs-1)*w.Think.MeanValue().Seconds() + (stmts-reqs)*a, 1 / total
	}
}

// boundOf is closed class cl's bounds in c.
func (c Config) boundOf(cl Class) classBound {
	w := cl.Workload
	mode, size := c.Pooler.PoolMode, c.Pooler.DefaultPoolSize
	if c.Multi() {
		if i := c.poolOf(cl); i >= 0 {
			p := c.PoolList()[i]
			mode, size = p.Mode, p.Size
		}
	}
	b := classBound{name: cl.Name}
	q := w.Query.MeanValue().Seconds() + w.CPU.MeanValue().Seconds()
	h := 0.0
	if mode.Pooled() {
		h = 2 * c.Pooler.Hop.Seconds()
	}
	n := float64(w.StmtsPerTxn)
	k, t := w.Requests()
	b.units, b.txns, b.z = float64(k), t.MeanValue(), w.Think.MeanValue().Seconds()
	b.request = w.RequestLevel()
	a := w.AppPause().MeanValue().Seconds()
	// The unit's statements, with the App pauses between them.
	b.r0 = b.txns*n*(q+h) + (b.txns*n-1)*a
	usable := c.Server.Usable()
	connCPU := 0.0 // start-up CPU per transaction
	servers, name := usable, "the backends (max_connections)"
	if mode.Pooled() {
		per := min(c.share(size), usable)
		if c.Pooler.MaxDBConnections > 0 {
			per = min(per, c.share(c.Pooler.MaxDBConnections))
		}
		servers, name = min(per*c.Pooler.Processes, usable), "the pool's servers"
		if p := c.PoolList()[max(c.poolOf(cl), 0)]; c.Multi() && p.Name != "" {
			name = "the servers of pool " + p.Name
		}
	}
	if cl.AppPool.Mode == NoAppPool {
		// Each client holds its own connection: only so many connect.
		b.clients = min(w.Clients, usable)
		if mode.Pooled() {
			b.clients = min(w.Clients, c.Pooler.MaxClientConn*c.Pooler.Processes)
		}
		s, perTxn := hold(c, w, mode)
		b.dPool, b.pool = s*perTxn/float64(servers), name
	} else {
		// Every client cycles, borrowing a connection per transaction: a
		// server is held at least for the transaction (longer in session
		// mode, where it stays linked to the borrowed connection), and a
		// queue pool's connections are a resource of their own.
		b.clients = w.Clients
		txn := n*q + (n-1)*(a+h)
		if cl.AppPool.Mode == NullPool && mode == poolmode.Direct {
			// A new backend for every transaction: its start-up is in
			// the transaction's time, and on the cores when there are.
			conn := c.Server.Connect.MeanValue().Seconds()
			txn += conn
			b.r0 += b.txns * conn
			connCPU = conn
		}
		held := txn
		if mode == poolmode.Statement { // a server per statement, not per transaction
			held = n * q
		}
		b.dPool, b.pool = held/float64(servers), name
		if cl.AppPool.Mode == QueuePool {
			if d := txn / float64(cl.AppPool.Size+cl.AppPool.MaxOverflow); d > b.dPool {
				b.dPool, b.pool = d, "the application pool's connections"
			}
		}
	}
	if c.Server.Cores > 0 {
		b.dCPU = (n*w.CPU.MeanValue().Seconds() + connCPU) / float64(c.Server.Cores)
	}
	return b
}

// closedBounds gives a closed workload's asymptotic bounds: throughput at
// most N·T/(R0+Z) (nobody waits) and at most the bottleneck's capacity;
// the knee N* is where they cross. With classes, each class is bounded by
// its own clients and pool and all together by the shared cores. An open
// workload has none (false): its throughput is what arrives, and the
// Erlang paragraph says whether the servers keep up.
func closedBounds(c Config, m Metrics) (Paragraph, bool) {
	if c.Open() {
		return Paragraph{}, false
	}
	classes := c.ClassList()
	p := Paragraph{Kind: KindClosedBounds, Title: "Bounds for a closed system"}
	if len(classes) > 1 {
		return multiBounds(c, m, classes, p), true
	}
	b := c.boundOf(classes[0])
	dmax, name := b.dMax()
	xMax := math.Min(b.population(), 1/dmax)
	knee := (b.r0 + b.z) / (b.txns * dmax)
	fin := math.Min(b.finite(), 1/dmax)
	p.Inputs = []Value{{"N", "", float64(b.clients)}, {"T", "", b.txns}, {"K", "", b.units}, {"R0", "s", b.r0}, {"Z", "s", b.z},
		{"D_max", "s", dmax}, {"X_max", "/s", xMax}, {"N*", "", knee}}
	var s string
	if b.request {
		s = fmt.Sprintf("Bounds for a closed system: %s, each cycling through requests of %s on average: "+
			"a request takes at least R0 = %s with nobody waiting and is preceded by Z = %s of think time; "+
			"the bottleneck is %s, needing %s per transaction (D_max). Throughput is at most min(N·T/(R0+Z), 1/D_max) = %.6g "+
			"transactions/s, and the knee, where adding clients stops adding throughput, is N* = (R0+Z)/(T·D_max) = %.4g clients.",
			count(b.clients, "client"), countOf(b.txns, "transaction"), fmtSec(b.r0), fmtSec(b.z), name, fmtSec(dmax), xMax, knee)
	} else {
		s = fmt.Sprintf("Bounds for a closed system: %s, each transaction taking at least R0 = %s with nobody waiting and followed by Z = %s of think time; "+
			"the bottleneck is %s, needing %s per transaction (D_max). Throughput is at most min(N/(R0+Z), 1/D_max) = %.6g/s, and the knee, "+
			"where adding clients stops adding throughput, is N* = (R0+Z)/D_max = %.4g clients.",
			count(b.clients, "client"), fmtSec(b.r0), fmtSec(b.z), name, fmtSec(dmax), xMax, knee)
	}
	law := "min(N·T/(R0+Z), 1/D_max)"
	switch {
	case fin <= xMax*(1+1e-9):
	case b.request:
		law = "min(N·K·T/(K·R0+(K-1)·Z), 1/D_max)"
		s += fmt.Sprintf(" Each client runs only K = %s and tps = ok/wall counts from the first attempt, so only K-1 "+
			"think times fall in the run: over it the bound is %s = %.6g/s.", countOf(b.units, "request"), law, fin)
	default:
		law = "min(N·K/(K·R0+(K-1)·Z), 1/D_max)"
		s += fmt.Sprintf(" Each client runs only K = %s and thinks only between them, so over the whole run (tps = ok/wall) "+
			"the bound is %s = %.6g/s.", countOf(b.units, "transaction"), law, fin)
	}
	p.Checks = []Check{bounded("X", "/s", law, fin, m.TPS)}
	p.Text = s + fmt.Sprintf(" The simulation ran at %.6g/s (%.1f%% of the bound).", m.TPS, 100*m.TPS/fin)
	return p, true
}

// multiBounds is closedBounds for several classes: each class's own
// bound, their sum, and the shared cores' capacity.
func multiBounds(c Config, m Metrics, classes []Class, p Paragraph) Paragraph {
	var parts []string
	// The cores serve at most cores/D_cpu transactions a second of the
	// class needing the least CPU, when every class needs some.
	sum, cpu := 0.0, 0.0
	for _, cl := range classes {
		b := c.boundOf(cl)
		x := math.Min(b.finite(), 1/b.dPool)
		sum += x
		cpu = math.Max(cpu, 1/b.dCPU) // +Inf when the class needs no CPU
		unit := "transactions"
		if b.request {
			unit = "requests of T = " + countOf(b.txns, "transaction")
		}
		parts = append(parts, fmt.Sprintf("%s: %s, %s taking at least R0 = %s with nobody waiting and Z = %s of think time, "+
			"%s needing %s per transaction, at most %.6g/s", b.name, count(b.clients, "client"), unit, fmtSec(b.r0), fmtSec(b.z), b.pool, fmtSec(b.dPool), x))
		p.Inputs = append(p.Inputs, Value{b.name + ".N", "", float64(b.clients)}, Value{b.name + ".R0", "s", b.r0},
			Value{b.name + ".Z", "s", b.z}, Value{b.name + ".X_max", "/s", x})
	}
	bound := math.Min(sum, cpu)
	s := fmt.Sprintf("Bounds for a closed system of %d classes, each bounded by its own clients, min(N·T/(R0+Z), 1/D_pool) "+
		"(over the whole run: its clients' sessions end), and all together by the shared cores - %s. Together at most %.6g/s",
		len(classes), strings.Join(parts, "; "), sum)
	if !math.IsInf(cpu, 1) {
		s += fmt.Sprintf(", and the server's CPU serves at most %.6g/s of the class needing the least of it", cpu)
	}
	p.Checks = []Check{bounded("X", "/s", "sum of the classes' min(N·T/(R0+Z), 1/D_pool), at most the cores' capacity", bound, m.TPS)}
	p.Text = s + fmt.Sprintf(". The simulation ran at %.6g/s (%.1f%% of the bound %.6g/s).", m.TPS, 100*m.TPS/bound, bound)
	return p
}
