package advise

import (
	"github.com/poolsim/poolsim/models/poolmode"
)

// Classic are the rules of thumb for one class, beside the simulated
// answer: Little's law L = X·S at the class's steady throughput X, with S
// the server time of a transaction (its statements' query and CPU time:
// the connections busy on average) and with S the time a transaction
// holds its server in transaction pooling (that, plus the application's
// time and the hops between its statements: the connections held on
// average). Neither can exceed the class's client connections; Capped
// says when one was cut to them.
type Classic struct {
	TPS        float64 `json:"tps"`
	ServiceMs  float64 `json:"server_ms_per_txn"`
	LittleBusy float64 `json:"little_busy_conns"`
	HeldMs     float64 `json:"held_ms_per_txn"`
	LittleHeld float64 `json:"little_held_conns"`
	Conns      int     `json:"client_conns"`
	Capped     bool    `json:"capped"`
}

// Hikari is HikariCP's rule for the whole server: cores × 2 + effective
// spindles.
type Hikari struct {
	Cores    int  `json:"cores"`
	Spindles int  `json:"spindles"`
	Conns    int  `json:"conns"`
	Assumed  bool `json:"cores_assumed"` // the scenario has no server.cores and none was given: 2 assumed
	FromFlag bool `json:"cores_from_flag"`
}

// classic fills each class's rules of thumb at the answer (or the
// closest) and HikariCP's.
func (e *engine) classic() {
	h := Hikari{Cores: e.r.ServerCores, Spindles: e.r.Spindles, FromFlag: e.r.CoresSet}
	if !e.r.CoresSet {
		h.Cores = e.base.Server.Cores
		if h.Cores == 0 {
			h.Cores, h.Assumed = 2, true
		}
	}
	h.Conns = 2*h.Cores + h.Spindles
	e.a.Hikari = h
	for _, c := range e.classes {
		if len(c.Reps) == 0 {
			continue
		}
		w := c.w
		k := Classic{Conns: c.Conns}
		k.TPS, _ = stat(c.Reps, fTPSSteady)
		q := w.Query.MeanValue().Milliseconds() + w.CPU.MeanValue().Milliseconds()
		hop := 0.0
		if p := e.pools[c.pool].Choice; p == nil || p.Mode != poolmode.Direct {
			hop = e.base.Pooler.Hop.Milliseconds()
		}
		k.ServiceMs = float64(w.StmtsPerTxn) * q
		k.HeldMs = k.ServiceMs + float64(w.StmtsPerTxn-1)*(w.AppPause().MeanValue().Milliseconds()+2*hop)
		k.LittleBusy = k.TPS * k.ServiceMs / 1000
		k.LittleHeld = k.TPS * k.HeldMs / 1000
		if c.Conns > 0 && (k.LittleBusy > float64(c.Conns) || k.LittleHeld > float64(c.Conns)) {
			k.LittleBusy, k.LittleHeld = min(k.LittleBusy, float64(c.Conns)), min(k.LittleHeld, float64(c.Conns))
			k.Capped = true
		}
		c.Classic = k
	}
}
