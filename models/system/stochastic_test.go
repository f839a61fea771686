package system

import (
	"reflect"
	"strings"
	"testing"

	"github.com/poolsim/poolsim/models/poolmode"
	"github.com/poolsim/poolsim/sim"
)

// constantClasses is two closed classes whose every draw is constant: web
// runs requests (2 per session, 2 transactions each, app time between
// statements, think between requests), batch plain transactions of two
// statements with a think between them.
func constantClasses() Config {
	c := twoClasses()
	c.Server.Connect = sim.ConstDist(sim.Millisecond)
	batch, web := &c.Classes[0].Workload, &c.Classes[1].Workload
	batch.Clients, batch.TxnsPerSession, batch.StmtsPerTxn = 6, 4, 2
	batch.Think = sim.ConstDist(300 * sim.Microsecond)
	web.Clients, web.StmtsPerTxn = 4, 2
	web.RequestsPerSession, web.TxnsPerRequest = 2, sim.ConstInt(2)
	web.App, web.AppSet = sim.ConstDist(200*sim.Microsecond), true
	web.Think = sim.ConstDist(2 * sim.Millisecond)
	web.Parse = sim.ConstDist(100 * sim.Microsecond)
	return c
}

// A draw made by one class only, of every kind a run makes, makes the
// whole configuration stochastic - and the draw is real: two seeds give
// different metrics. Every distribution field of Workload is tried (found
// by reflection, so a field added later is tried too), then arrivals,
// several statements, the server's connect time, several pooler processes.
func TestStochasticFindsEveryClassDraw(t *testing.T) {
	base := constantClasses()
	if err := base.Validate(); err != nil {
		t.Fatal(err)
	}
	differs := func(c Config) bool {
		a := c
		a.Seed = 1
		b := c
		b.Seed = 2
		return !reflect.DeepEqual(Run(a), Run(b))
	}
	if base.Stochastic() || differs(base) {
		t.Fatalf("every draw constant: Stochastic %v, seeds differ %v; want neither", base.Stochastic(), differs(base))
	}
	type variant struct {
		name string
		set  func(c *Config)
	}
	var vs []variant
	wt := reflect.TypeFor[Workload]()
	for i := range wt.NumField() {
		f := wt.Field(i)
		switch f.Type {
		case reflect.TypeFor[sim.Dist]():
			vs = append(vs, variant{"web workload." + f.Name, func(c *Config) {
				reflect.ValueOf(&c.Classes[1].Workload).Elem().Field(i).Set(reflect.ValueOf(sim.ExpDist(sim.Millisecond)))
			}})
		case reflect.TypeFor[sim.IntDist]():
			vs = append(vs, variant{"web workload." + f.Name, func(c *Config) {
				d, _ := sim.UniformInt(1, 4)
				reflect.ValueOf(&c.Classes[1].Workload).Elem().Field(i).Set(reflect.ValueOf(d))
			}})
		}
	}
	if len(vs) < 6 {
		t.Fatalf("found %d distributions in Workload, want query, cpu, think, txns_per_request, app, parse at least", len(vs))
	}
	vs = append(vs,
		variant{"batch workload.Think (between its statements)", func(c *Config) { c.Classes[0].Workload.Think = sim.ExpDist(sim.Millisecond) }},
		variant{"both classes open (Poisson arrivals)", func(c *Config) {
			for k := range c.Classes {
				w := &c.Classes[k].Workload
				w.Clients, w.ArrivalRate, w.Duration, w.WarmupAuto = 0, 200, sim.Second, false
			}
		}},
		variant{"web workload.statements", func(c *Config) {
			c.Classes[1].Workload.Statements = 8
			c.Classes[1].Workload.PrepareThreshold = 1
			c.Classes[1].Workload.Parse = sim.ConstDist(2 * sim.Millisecond)
		}},
		variant{"server.connect", func(c *Config) { c.Server.Connect = sim.ExpDist(sim.Millisecond) }},
		variant{"pooler.processes", func(c *Config) { c.Pooler.Processes = 3; c.Pooler.Cancels = 100 }},
	)
	for _, v := range vs {
		c := base.Clone()
		v.set(&c)
		if err := c.Validate(); err != nil {
			t.Fatalf("%s: %v", v.name, err)
		}
		if !c.Stochastic() {
			t.Errorf("%s random: Stochastic false, so a study runs it once and calls it exact", v.name)
		}
		if !differs(c) {
			t.Errorf("%s random: seeds 1 and 2 give the same run - the test draws nothing", v.name)
		}
	}
}

// A distribution a run never draws does not make it stochastic: think time
// after a session's only statement.
func TestStochasticIgnoresUndrawn(t *testing.T) {
	c := closed(poolmode.Transaction, 4, 1, 1, sim.Millisecond, 0)
	c.Workload.Think = sim.ExpDist(sim.Millisecond)
	if c.Stochastic() {
		var random []string
		for _, d := range c.draws() {
			if d.random {
				random = append(random, d.what)
			}
		}
		t.Errorf("think after the only statement: stochastic by %s", strings.Join(random, ", "))
	}
}
