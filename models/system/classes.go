package system

import (
	"fmt"
	"slices"

	"github.com/poolsim/poolsim/models/poolmode"
	"github.com/poolsim/poolsim/sim"
)

// Client classes and pools. Real applications have several kinds of
// client - web workers, a report job, a queue consumer - with their own
// workload, their own application pool, and often their own pool at the
// pooler (a separate database entry or user in pgbouncer.ini, with its own
// pool_mode and pool_size). A class says what its clients do and which
// pool they connect to; a pool is one (database, user) pair of PgBouncer
// with its mode and size. All pools share the pooler's max_client_conn,
// max_db_connections (per database), max_user_connections (per user) and
// the server's max_connections.
//
// A configuration without classes is one class of Workload and AppPool
// connecting to one pool of Pooler.Mode and Pooler.DefaultPoolSize, and
// runs exactly as before classes existed.

// Class is a named group of clients.
type Class struct {
	Name     string
	Workload Workload
	AppPool  AppPool
	Pool     string // the pool it connects to (a PoolSpec's Name); "" = the first
	// Set lists the workload and app_pool keys the class sets itself
	// ("workload.clients"); the others follow the scenario's.
	Set []string
}

// PoolSpec is one pool of the pooler: a database and user, with
// PgBouncer's per-database and per-user settings.
type PoolSpec struct {
	Name     string
	Database string
	User     string
	// Mode is the pool's pool_mode (Direct: its clients connect to the
	// server itself, no pooler); ModeSet false takes Pooler.Mode.
	Mode    poolmode.Mode
	ModeSet bool
	// Size is the pool's pool_size; 0 takes Pooler.DefaultPoolSize.
	Size int
}

// Multi reports whether c has classes of its own.
func (c Config) Multi() bool { return len(c.Classes) > 0 }

// ClassList is c's classes: its own, or the one class of Workload and
// AppPool.
func (c Config) ClassList() []Class {
	if len(c.Classes) > 0 {
		return c.Classes
	}
	return []Class{{Workload: c.Workload, AppPool: c.AppPool}}
}

// PoolList is c's pools with their modes and sizes resolved: its own, or
// the one pool of Pooler.Mode and Pooler.DefaultPoolSize.
func (c Config) PoolList() []PoolSpec {
	if len(c.Pools) == 0 {
		return []PoolSpec{{Database: "app", User: "app", Mode: c.Pooler.PoolMode, ModeSet: true, Size: c.Pooler.DefaultPoolSize}}
	}
	out := make([]PoolSpec, len(c.Pools))
	for i, p := range c.Pools {
		if !p.ModeSet {
			p.Mode, p.ModeSet = c.Pooler.PoolMode, true
		}
		if p.Size == 0 {
			p.Size = c.Pooler.DefaultPoolSize
		}
		if p.Database == "" {
			p.Database = p.Name
		}
		if p.User == "" {
			p.User = "app"
		}
		out[i] = p
	}
	return out
}

// poolOf is the index in PoolList of the pool class cl connects to.
func (c Config) poolOf(cl Class) int {
	if cl.Pool == "" {
		return 0
	}
	for i, p := range c.Pools {
		if p.Name == cl.Pool {
			return i
		}
	}
	return -1
}

// PoolModes are the pool modes c's clients use, in pool order.
func (c Config) PoolModes() []poolmode.Mode {
	var out []poolmode.Mode
	for _, p := range c.PoolList() {
		if !slices.Contains(out, p.Mode) {
			out = append(out, p.Mode)
		}
	}
	return out
}

// Open reports whether c's workload is open (Poisson arrivals); with
// classes, every class's is (Validate refuses a mix).
func (c Config) Open() bool {
	for _, cl := range c.ClassList() {
		if !cl.Workload.Open() {
			return false
		}
	}
	return true
}

// RequestLevel reports whether any class runs requests of its own.
func (c Config) RequestLevel() bool {
	for _, cl := range c.ClassList() {
		if cl.Workload.RequestLevel() {
			return true
		}
	}
	return false
}

// OfferedTPS is an open workload's offered load in transactions per
// second (0 for a closed one).
func (c Config) OfferedTPS() float64 {
	var sum float64
	for _, cl := range c.ClassList() {
		sum += cl.Workload.OfferedTPS()
	}
	return sum
}

// Duration is an open workload's arrival period.
func (c Config) Duration() sim.Time { return c.ClassList()[0].Workload.Duration }

// validateClasses checks the classes and pools.
func (c Config) validateClasses(bad func(string, ...any)) {
	if len(c.Classes) == 0 {
		if len(c.Pools) > 1 {
			bad("pools: %d pools but no classes to use them; name each class's pool under classes", len(c.Pools))
		}
		return
	}
	names := map[string]bool{}
	open := 0
	for _, cl := range c.Classes {
		if cl.Name == "" {
			bad("classes: a class needs a name")
		}
		if names[cl.Name] {
			bad("classes: %q twice", cl.Name)
		}
		names[cl.Name] = true
		if c.poolOf(cl) < 0 {
			var ps []string
			for _, p := range c.Pools {
				ps = append(ps, p.Name)
			}
			bad("classes.%s.pool %q: no such pool; the pools are %v", cl.Name, cl.Pool, ps)
		}
		if cl.Workload.Open() {
			open++
		}
		cl.Workload.validate(fmt.Sprintf("classes.%s.workload", cl.Name), bad)
		cl.AppPool.validate(fmt.Sprintf("classes.%s.app_pool", cl.Name), bad)
		workersAppPool(cl.Workload, cl.AppPool, fmt.Sprintf("classes.%s.", cl.Name), bad)
	}
	if open > 0 && open < len(c.Classes) {
		bad("classes: %d open and %d closed: every class is closed (clients) or every class open (arrival_rate, with or without workers) in one scenario: a run's steady window is an open or a closed one", open, len(c.Classes)-open)
	}
	if open > 0 {
		d := c.Classes[0].Workload.Duration
		for _, cl := range c.Classes {
			if cl.Workload.Duration != d {
				bad("classes: open classes must share workload.duration (%v and %v)", d, cl.Workload.Duration)
				break
			}
		}
	}
	pn := map[string]bool{}
	dbu := map[[2]string]string{}
	for _, p := range c.PoolList() {
		if pn[p.Name] {
			bad("pools: %q twice", p.Name)
		}
		pn[p.Name] = true
		k := [2]string{p.Database, p.User}
		if other, dup := dbu[k]; dup {
			bad("pools %q and %q are both database %s, user %s: PgBouncer has one pool per database and user", other, p.Name, p.Database, p.User)
		}
		dbu[k] = p.Name
		if p.Mode > poolmode.Statement {
			bad("pools.%s.mode %v is not a mode", p.Name, p.Mode)
		}
		if p.Size < 1 {
			bad("pools.%s.size must be at least 1, got %d", p.Name, p.Size)
		}
	}
}

// Clone is a copy of c that shares no slice with it: a setter applied to
// the copy (a sweep point, a probe) leaves c as it was.
func (c Config) Clone() Config {
	if c.Classes != nil {
		cls := make([]Class, len(c.Classes))
		for i, cl := range c.Classes {
			cl.Set = append([]string(nil), cl.Set...)
			cls[i] = cl
		}
		c.Classes = cls
	}
	if c.Pools != nil {
		c.Pools = append([]PoolSpec(nil), c.Pools...)
	}
	return c
}
