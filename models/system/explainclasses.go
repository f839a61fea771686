package system

import (
	"fmt"
	"math"
	"strings"

	"github.com/poolsim/poolsim/models/poolmode"
)

// explainClasses is Explain for a configuration with classes: every
// figure it quotes is a pool's or a class's where the model measures it
// so (a class's metrics hold its pool's wait queue and its own
// application queue; the server's CPU is the run's), and every formula is
// computed from the class's own workload and pool. Without the classes'
// metrics (cms not one per class) it says only what the run's metrics
// support: the steady state and the closed-system bounds.
func explainClasses(c Config, m Metrics, cms []Metrics) []Paragraph {
	out := []Paragraph{steadyWords(c, m)}
	classes, pools := c.ClassList(), c.PoolList()
	have := len(cms) == len(classes)
	if have {
		for i, p := range pools {
			var who []string
			first := -1
			for k, cl := range classes {
				if c.poolOf(cl) == i {
					who = append(who, cl.Name)
					if first < 0 {
						first = k
					}
				}
			}
			if !p.Mode.Pooled() || first < 0 {
				continue
			}
			pm := cms[first] // a class's pooler figures are its pool's
			pool := "The wait queue of pool " + p.Name
			if p.Name == "" { // classes without pools: the pooler's one
				pool = "The pooler's wait queue"
			}
			name := fmt.Sprintf("%s (%s, pool_size %d: clients of %s waiting for a server connection)",
				pool, p.Mode, p.Size, strings.Join(who, " and "))
			out = append(out, edges(little(name, "departures (assignments and query_wait_timeout disconnects)", pm.WaitL, pm.WaitLambda, pm.WaitW), m))
		}
		for k, cl := range classes {
			cm := cms[k]
			if cl.AppPool.Mode == QueuePool {
				out = append(out, edges(little(fmt.Sprintf("The application pool of class %s (its clients waiting for a pooled connection)", cl.Name),
					"departures (connections handed over and acquire timeouts)", cm.AppWaitL, cm.AppWaitLambda, cm.AppWaitW), m))
			}
			if cl.Workload.Persistent() {
				out = append(out, edges(little(fmt.Sprintf("The application queue of class %s (requests waiting for one of its %s)", cl.Name, count(cl.Workload.Workers, "worker")),
					"requests taken by a worker", cm.AppWaitL, cm.AppWaitLambda, cm.AppWaitW), m))
			}
		}
		if c.Server.Cores > 0 {
			out = append(out, cpuClasses(c, m, cms))
		}
		for k, cl := range classes {
			if cl.Workload.Persistent() {
				p := pools[max(c.poolOf(cl), 0)]
				e := workersErlang(c, cl.Name, cl.Workload, p.Mode, c.specLimit(p), cms[k])
				out = append(out, poolLoad(c, p, e))
			}
		}
	}
	if p, ok := closedBounds(c, m); ok {
		out = append(out, p)
	}
	for i := range out {
		out[i] = out[i].Finite()
	}
	return out
}

// LittleSlack is how far λW may be from L, relative to L, before a
// Little paragraph says why: the queue's waits under way at the window's
// ends are in L and not in λW (W is over the departures).
const LittleSlack = 0.01

// edges adds to Little paragraph p, when λW and L differ by more than
// LittleSlack, why: the queue did not start or end the window as it was
// at the other end - waits under way at its close are in L and not yet in
// λW; waits begun before it opened are in λW and only partly in L. It
// quotes the run's backlog at the window's ends (m, every class's).
func edges(p Paragraph, m Metrics) Paragraph {
	if len(p.Checks) != 1 {
		return p
	}
	lw, L := p.Checks[0].Computed, p.Checks[0].Measured
	switch {
	case L-lw > LittleSlack*L:
		p.Text += fmt.Sprintf(" L is the larger by %.3g%%: the queue had not emptied when the window closed (%d sessions or requests "+
			"of every class were still in the system, backlog_end), and the waits still under way are in L but not yet in λW, "+
			"whose W is over the departures only. Little's law holds over a span that ends as it began; a queue that grows "+
			"through the window, its offered load at or above what serves it, does not.", 100*(L-lw)/L, m.BacklogEnd)
	case lw-L > LittleSlack*L:
		p.Text += fmt.Sprintf(" λW is the larger by %.3g%%: the queue already held waiters when the window opened (%d sessions or "+
			"requests of every class were in the system, backlog_start), whose whole waits are in λW but only their part "+
			"inside the window in L.", 100*(lw-L)/math.Max(L, lw), m.BacklogStart)
	}
	return p
}

// poolLoad adds to a workers class's Erlang paragraph e the load offered
// to its pool p when every class of the pool is open and the pool hands a
// server out per transaction or statement: A = Σ λ·S over those classes
// (λ their offered transactions a second, S the time a transaction holds
// servers, hold's), in Erlangs, beside the pool's servers. At or above
// them the workers wait for servers, and M/M/N's "nobody waiting for a
// server" fails: the paragraph says so.
func poolLoad(c Config, p PoolSpec, e Paragraph) Paragraph {
	if p.Mode != poolmode.Transaction && p.Mode != poolmode.Statement {
		return e
	}
	a := 0.0
	var who []string
	for _, cl := range c.ClassList() {
		if c.PoolList()[max(c.poolOf(cl), 0)].Name != p.Name {
			continue
		}
		if !cl.Workload.Open() {
			return e
		}
		s, perTxn := hold(c, cl.Workload, p.Mode)
		a += cl.Workload.OfferedTPS() * s * perTxn
		who = append(who, cl.Name)
	}
	servers := c.specLimit(p) * c.Pooler.Processes
	e.Inputs = append(e.Inputs, Value{"A_pool", "", a}, Value{"c_pool", "", float64(servers)})
	if a < float64(servers) {
		return e
	}
	e.Text += fmt.Sprintf(" But pool %s cannot keep up: the transactions of %s offer its %s A = Σ λS = %.4g Erlangs, "+
		"at or above their number, so workers wait for a server, requests wait for the workers, and the application "+
		"queue grows through the run: M/M/N, which has nobody waiting for a server, does not apply.",
		p.Name, strings.Join(who, " and "), count(servers, "server"), a)
	return e
}

// specLimit is how many server connections pool p may open at each
// pooler process (as the model limits it).
func (c Config) specLimit(p PoolSpec) int {
	n := min(c.share(p.Size), c.Server.Usable())
	if c.Pooler.MaxDBConnections > 0 {
		n = min(n, c.share(c.Pooler.MaxDBConnections))
	}
	if c.Pooler.MaxUserConnections > 0 {
		n = min(n, c.share(c.Pooler.MaxUserConnections))
	}
	return n
}

// classDemand is one class's part of the CPU law: its statements'
// completion rate X and mean CPU each D (configured).
type classDemand struct {
	Name string
	X, D float64
}

// cpuDemand is the CPU law's demand over the classes (c.ClassList(),
// cms their metrics): each class's statements completed per second - over
// the steady window for an open run, the run's wall for a closed one, as
// the utilisation is measured - and their mean CPU. U = Σ X·D / cores.
func cpuDemand(c Config, m Metrics, cms []Metrics) []classDemand {
	var out []classDemand
	wall := m.WallMs / 1000
	for k, cl := range c.ClassList() {
		w := cl.Workload
		x := 0.0
		switch {
		case c.Open():
			x = cms[k].TPSSteady * float64(w.StmtsPerTxn)
		case wall > 0:
			x = float64(cms[k].OKTxns) * float64(w.StmtsPerTxn) / wall
		}
		out = append(out, classDemand{Name: cl.Name, X: x, D: w.CPU.MeanValue().Seconds()})
	}
	return out
}

// cpuClasses is the utilisation law over every class's demand.
func cpuClasses(c Config, m Metrics, cms []Metrics) Paragraph {
	p := Paragraph{Kind: KindCPU, Title: "The server's CPU"}
	var x, xd float64
	var parts []string
	p.Inputs = []Value{{"cores", "", float64(c.Server.Cores)}}
	for _, d := range cpuDemand(c, m, cms) {
		x += d.X
		xd += d.X * d.D
		parts = append(parts, fmt.Sprintf("%s at %.6g/s needing %s of CPU each", d.Name, d.X, fmtSec(d.D)))
		p.Inputs = append(p.Inputs, Value{d.Name + ".X", "/s", d.X}, Value{d.Name + ".D", "s", d.D})
	}
	if x == 0 {
		p.Text = "The server's CPU: no transaction completed."
		return p
	}
	cores := float64(c.Server.Cores)
	u, d := xd/cores, xd/x
	note := ""
	if c.Machine != nil {
		note = " The measured figure is the machine's (Config.Machine): whatever else it runs on the same cores is in it."
	}
	p.Inputs = append(p.Inputs, Value{"X", "/s", x}, Value{"D", "s", d}, Value{"L", "", m.CPUJobsL}, Value{"L/X", "s", m.CPUJobsL / x})
	p.Checks = []Check{predicted("U", "", "Σ X·D / cores", u, m.CPUUtil)}
	p.Text = fmt.Sprintf("The server's CPU (%s, shared by the classes): the classes' statements completed - %s - so the utilisation law "+
		"U = Σ X·D / cores predicts %.3f busy; the simulation measured %.3f (start-ups and contention add to it). "+
		"On average %.4g statements were running (L) of the %.6g/s completed (X), so each spent about L/X = %s on the CPU, "+
		"of which its own work was %s on average over the classes' statements.",
		count(c.Server.Cores, "core"), strings.Join(parts, ", "), u, m.CPUUtil, m.CPUJobsL, x, fmtSec(m.CPUJobsL/x), fmtSec(d)) + note
	return p
}
