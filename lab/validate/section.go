package validate

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/poolsim/poolsim/lab/testbed"
	"github.com/poolsim/poolsim/models/system"
	"github.com/poolsim/poolsim/scenarios"
	"github.com/poolsim/poolsim/sim"
)

// The validate: section of a scenario is poolsim validate's own: how a
// statement takes the workload's time at a real server (Live), and the
// test machine the calibrated model runs on (testbed.Machine) where the
// scenario gives one. The scenarios package keeps it as written
// (scenarios.Section); Decode reads it as strictly as the scenarios
// package reads its own keys: an unknown or repeated key is an error
// naming the key and its line, and every value is checked, with a message
// saying what is expected.

// Live says how poolsim validate runs the workload for real.
type Live struct {
	// Statement is "sleep" (pg_sleep), "cpu" (a CPU-bound statement
	// calibrated to the time), "sql" or "pgbench-select".
	Statement string
	SQL       string // the statement to run when Statement is "sql"
	// Scale is pgbench's scale factor for Statement "pgbench-select"
	// (100,000 pgbench_accounts rows each).
	Scale int
	// Driver is the load driver: "poolsim" (its own, in process) or
	// "pgbench" (pgbench itself, Statement "pgbench-select" only).
	Driver string
	// WithHold names the classes whose requests hold a WITH HOLD cursor
	// across their transactions live (load.Spec.Hold): the feature that
	// needs session pooling.
	WithHold []string
}

// Settings are a scenario's validate: section, decoded.
type Settings struct {
	Live Live
	// Machine is the test machine the scenario's models run on (zero:
	// none given, the production what-if); a CPU-bound row's calibrated
	// model runs on the one its calibration fits.
	Machine testbed.Machine
}

var (
	liveStatements = []string{"sleep", "cpu", "sql", "pgbench-select"}
	liveDrivers    = []string{"poolsim", "pgbench"}
)

// sectionKey is one key of the validate: section.
type sectionKey struct {
	key string // its name in the section
	doc string // what it is and what it accepts
	set func(s *Settings, n *yaml.Node) error
}

// sectionKeys are the validate: section's keys, in documentation order.
var sectionKeys = []sectionKey{
	{"statement", "how poolsim validate spends workload.query at the real server: sleep (pg_sleep, whole milliseconds), cpu (a CPU-bound statement calibrated on the spot), sql (validate.sql) or pgbench-select (pgbench -S's statement against a database pgbench -i initialises; its CPU is measured and the calibrated model runs it on server.cores with the pooler and the load driver)", func(s *Settings, n *yaml.Node) error {
		i, err := scenarios.ReadChoice(n, liveStatements)
		if err == nil {
			s.Live.Statement = liveStatements[i]
		}
		return err
	}},
	{"scale", "pgbench's scale factor for validate.statement: pgbench-select (100,000 accounts each; 1..1000; default 1)", func(s *Settings, n *yaml.Node) error {
		v, err := scenarios.ReadInt(n, 1, 1000)
		if err == nil {
			s.Live.Scale = int(v)
		}
		return err
	}},
	{"driver", "poolsim validate's load driver: poolsim (its own, in this process; default) or pgbench (pgbench -S itself, a process of its own: validate.statement pgbench-select, closed clients with no think; its CPU is the testbed's driver)", func(s *Settings, n *yaml.Node) error {
		i, err := scenarios.ReadChoice(n, liveDrivers)
		if err == nil {
			s.Live.Driver = liveDrivers[i]
		}
		return err
	}},
	{"sql", "the statement poolsim validate runs with validate.statement: sql (the model still uses workload.query; with server.cores the statement is CPU on the cores, calibrated as pgbench-select's is: its CPU measured and run by the calibrated model with the pooler and the load driver)", func(s *Settings, n *yaml.Node) error {
		v, err := scenarios.ReadScalar(n)
		if err != nil {
			return err
		}
		if len(v) > 100_000 {
			return fmt.Errorf("longer than 100000 bytes")
		}
		s.Live.SQL = v
		return nil
	}},
	{"with_hold", "classes whose requests poolsim validate runs holding a WITH HOLD cursor across their transactions (DECLARE in the first, FETCH in each later one, CLOSE after the last): a class name, a comma-separated list or a YAML list", func(s *Settings, n *yaml.Node) error {
		names, err := classNames(n)
		s.Live.WithHold = names
		return err
	}},
	{"driver_cpu", "live validation on one machine: the load driver's CPU per statement, run on server.cores before each statement is sent, shared with the statements but not slowed by the USL; a duration or a distribution (default 0: a production what-if)", func(s *Settings, n *yaml.Node) error {
		d, err := scenarios.ReadDist(n)
		s.Machine.DriverCPU = d
		return err
	}},
	{"pooler_on_cores", "live validation on one machine: each pooler process's thread runs its messages and assignments on server.cores (one at a time per process; pooler.wakeup is paid only when a core is idle as the thread wakes) instead of a CPU of its own (default false)", func(s *Settings, n *yaml.Node) error {
		v, err := scenarios.ReadBool(n)
		s.Machine.PoolerOnCores = v
		return err
	}},
	{"background", "cores' worth of CPU busy with work outside the test: the test keeps server.cores minus this, a number from 0, below server.cores (default 0)", func(s *Settings, n *yaml.Node) error {
		v, err := scenarios.ReadFloat(n, 0, 4096, "a number of cores from 0 to 4096")
		s.Machine.Background = v
		return err
	}},
	{"speed", "live validation on one machine: the cores' speed window by window, as a list of factors of the calibrated speed (each above 0, at most 100; mean about 1); the model plays them in order, one every validate.speed_period, from a start its seed draws (after the last, the first again), and every job on the cores runs at that factor of its rate (default none: one speed)", func(s *Settings, n *yaml.Node) error {
		v, err := speedList(n)
		s.Machine.Speed = v
		return err
	}},
	{"speed_period", "how long each of validate.speed's windows lasts, a duration of at least 100us (default 20ms)", func(s *Settings, n *yaml.Node) error {
		v, err := scenarios.ReadDuration(n)
		s.Machine.SpeedPeriod = v
		return err
	}},
	{"scheduler", "live validation on one machine: how the jobs share server.cores - shared (processor sharing: the cores one pool, no core idle while a job waits) or per_core (a run queue per core, as Linux has: a job is placed on a core as it starts and waits there, a core out of work idles while the other's queue waits unless a thread there has not run for 0.5 ms, and a thread with more work keeps its core) (default shared)", func(s *Settings, n *yaml.Node) error {
		i, err := scenarios.ReadChoice(n, []string{"shared", "per_core"})
		s.Machine.Scheduler = []testbed.Scheduler{testbed.Shared, testbed.PerCore}[i]
		return err
	}},
	{"driver_threads", "live validation on one machine: the load driver's threads; client u's statements are prepared by thread u mod driver_threads, one at a time, the others queued, as pgbench -j runs them (0..4096; default 0: every client its own)", func(s *Settings, n *yaml.Node) error {
		v, err := scenarios.ReadInt(n, 0, 4096)
		s.Machine.DriverThreads = int(v)
		return err
	}},
	{"driver_scan", "live validation on one machine: each driver thread (validate.driver_threads) works as pgbench's does - it polls, reads the results its poll found in client order, starts the next transaction of the clients whose transaction ended in a second pass, and times each transaction from that start to the reading of its last result; a result that comes during the passes waits for the next poll (default false: each thread takes its clients in the order they became ready)", func(s *Settings, n *yaml.Node) error {
		v, err := scenarios.ReadBool(n)
		s.Machine.DriverScan = v
		return err
	}},
	{"affinity", "live validation on one machine: pin the pooler's thread and the backends to cores as taskset does (validate.scheduler per_core, validate.pooler_on_cores): free (the scheduler places them), together (both on core 0) or apart (the pooler on core 0, the backends on the others) - with one server the kernel keeps one of the two arrangements for a run, each at costs of its own (default free)", func(s *Settings, n *yaml.Node) error {
		i, err := scenarios.ReadChoice(n, []string{"free", "together", "apart"})
		s.Machine.Affinity = []testbed.Affinity{testbed.Free, testbed.Together, testbed.Apart}[i]
		return err
	}},
	{"wakeup", "live validation on one machine: how long an idle core takes to wake for a backend woken from another core (validate.scheduler per_core): the backend waits that long before its statement runs; on its waker's core or a busy one it starts at once, a duration (default 0)", func(s *Settings, n *yaml.Node) error {
		v, err := scenarios.ReadDuration(n)
		s.Machine.Wakeup = v
		return err
	}},
	{"idle_balance", "live validation on one machine: whether a core that runs out of work takes a thread queued on another that has not run for 0.5 ms, as Linux's balancing on a newly idle core does (validate.scheduler per_core): true (at every chance), false (never: every queued thread stays on its core) or a duration (at most once per that) - poolsim validate fits it per row so that the model of its through loop keeps the cores as busy as the machine's CPUs were in that loop (default true)", func(s *Settings, n *yaml.Node) error {
		never, every, err := idleBalanceValue(n)
		s.Machine.NoIdleBalance, s.Machine.IdleBalanceEvery = never, every
		return err
	}},
	{"idle_scan", "live validation on one machine: whether a woken thread whose waker's core and own last core are both busy looks for an idle core (validate.scheduler per_core): true, or false, as Linux does when its cores are busy (SIS_UTIL), to go to the waker's core if nothing queues there, else its own last core - poolsim validate fits it per row with validate.idle_balance (default true)", func(s *Settings, n *yaml.Node) error {
		on, err := scenarios.ReadBool(n)
		if err == nil {
			s.Machine.NoIdleScan = !on
		}
		return err
	}},
	{"wake_curve", "live validation on one machine: an idle core's wake-up by how long it idled, instead of validate.wakeup and pooler.wakeup (validate.scheduler per_core): a list of [idle, wake-up] duration pairs, idle rising; a backend or the pooler's thread woken onto an idle core from another waits the curve's wake-up at that core's idle time, linear between the points and flat beyond them (lab/bench/wake-pingpong.sh measures one) (default none)", func(s *Settings, n *yaml.Node) error {
		c, err := wakeCurve(n)
		s.Machine.WakeCurve = c
		return err
	}},
	{"server_tail", "live validation on one machine: the share of a pooled statement's CPU its backend runs after it has sent the response, keeping its core, while the pooler relays it (validate.scheduler per_core); a statement that reaches that server meanwhile runs next on the same core - lab/bench/server-tail.sh measures it, poolsim validate sets it (0..0.5; default 0)", func(s *Settings, n *yaml.Node) error {
		v, err := scenarios.ReadFloat(n, 0, testbed.MaxServerTail, "a share of the statement's CPU from 0 to 0.5")
		s.Machine.ServerTail = v
		return err
	}},
	{"pooler_preempt", "live validation on one machine: how often per pooled statement a load driver's thread woken by a result takes the pooler's core from it while it runs, the pooler's thread waiting behind it (validate.scheduler per_core, validate.pooler_on_cores): Linux's wake-up preemption, PgBouncer's involuntary context switches - lab/bench/handover.sh measures it, poolsim validate sets it for pool 1 through PgBouncer (0..4; default 0)", func(s *Settings, n *yaml.Node) error {
		v, err := scenarios.ReadFloat(n, 0, testbed.MaxPreempt, "preemptions per pooled statement from 0 to 4")
		s.Machine.PoolerPreempt = v
		return err
	}},
	{"server_preempt", "live validation on one machine: how often per pooled statement a load driver's thread woken by a result takes a backend's core from it while it runs a statement, the backend waiting behind it (validate.scheduler per_core): the backends' involuntary context switches - poolsim validate sets it for pool 1 through PgBouncer with the server on a core of its own (0..4; default 0)", func(s *Settings, n *yaml.Node) error {
		v, err := scenarios.ReadFloat(n, 0, testbed.MaxPreempt, "preemptions per pooled statement from 0 to 4")
		s.Machine.ServerPreempt = v
		return err
	}},
	{"servers_open", "live validation: servers each pool already has open and idle at time zero, within its pool size and server.max_connections in all - a live pooler keeps the server the first client's login opened (PgBouncer caches its welcome) and those the validator's calibration through it opened, which poolsim validate counts at PostgreSQL right before each run; a direct pool ignores it (0..100000; default 0: every pool starts empty)", func(s *Settings, n *yaml.Node) error {
		v, err := scenarios.ReadInt(n, 0, 100000)
		s.Machine.ServersOpen = int(v)
		return err
	}},
}

// Keys describes every key of the validate: section, as "validate.key
// doc" lines (for poolsim validate's help).
func Keys() []string {
	out := make([]string, len(sectionKeys))
	for i, k := range sectionKeys {
		out[i] = fmt.Sprintf("%-34s %s", scenarios.SectionValidate+"."+k.key, k.doc)
	}
	return out
}

func sectionKeyNames() []string {
	out := make([]string, len(sectionKeys))
	for i, k := range sectionKeys {
		out[i] = k.key
	}
	return out
}

func lookupKey(name string) (sectionKey, bool) {
	for _, k := range sectionKeys {
		if k.key == name {
			return k, true
		}
	}
	return sectionKey{}, false
}

// Decode reads scenario sc's validate: section and its --set overrides
// and checks them against every point of its sweep. Its errors wrap
// scenarios.ErrInvalid.
func Decode(sc *scenarios.Scenario) (Settings, error) {
	s := Settings{Live: Live{Statement: "sleep", Scale: 1, Driver: "poolsim"}}
	sec := sc.Validate
	if err := s.decodeBlock(sc.Source, sec.Node); err != nil {
		return s, err
	}
	for _, o := range sec.Sets {
		k, ok := lookupKey(o.Key)
		if !ok {
			return s, fmt.Errorf("%w: %s: unknown key `validate.%s`%s (poolsim validate --help lists every key)", scenarios.ErrInvalid, o.Flag, o.Key, scenarios.DidYouMean(o.Key, sectionKeyNames()))
		}
		if err := k.set(&s, o.Value); err != nil {
			return s, fmt.Errorf("%w: %s: %v", scenarios.ErrInvalid, o.Flag, err)
		}
	}
	if msg := s.Live.check(); msg != "" {
		return s, scenarios.Invalid(sc.Source, 0, "%s", msg)
	}
	return s, s.checkMachine(sc)
}

// decodeBlock sets the keys of the section's mapping m (nil: none), each
// in turn, after checking that none is unknown or repeated.
func (s *Settings) decodeBlock(source string, m *yaml.Node) error {
	if m == nil {
		return nil
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(m.Content); i += 2 {
		k := m.Content[i]
		if line, dup := seen[k.Value]; dup {
			return scenarios.Invalid(source, k.Line, "key validate.%s repeated (first on line %d)", k.Value, line)
		}
		seen[k.Value] = k.Line
		if _, ok := lookupKey(k.Value); !ok {
			names := sectionKeyNames()
			return scenarios.Invalid(source, k.Line, "unknown key %q in validate: want one of %s%s", k.Value, strings.Join(names, ", "), scenarios.DidYouMean(k.Value, names))
		}
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		key, _ := lookupKey(k.Value)
		if err := key.set(s, v); err != nil {
			return scenarios.Invalid(source, v.Line, "validate.%s: %v", k.Value, err)
		}
	}
	return nil
}

// check is what is wrong with the live settings together, "" if nothing.
func (l Live) check() string {
	switch {
	case l.Statement == "sql" && l.SQL == "":
		return "validate.sql must hold the statement to run with validate.statement: sql"
	case l.Driver == "pgbench" && l.Statement != "pgbench-select":
		return fmt.Sprintf("validate.driver pgbench runs pgbench -S: it needs validate.statement pgbench-select, got %s", l.Statement)
	}
	return ""
}

// checkMachine checks the section's machine against every point of the
// scenario (its server's cores).
func (s Settings) checkMachine(sc *scenarios.Scenario) error {
	points, err := sc.Points()
	if err != nil {
		return err
	}
	for _, p := range points {
		c := p.Config
		c.Machine = s.Machine
		if err := c.Validate(); err != nil {
			return fmt.Errorf("%w: %s: %s", scenarios.ErrInvalid, sc.Source, strings.TrimPrefix(err.Error(), system.ErrInvalid.Error()+": "))
		}
	}
	return nil
}

// classNames reads validate.with_hold: a class name, a comma-separated
// list or a YAML list.
func classNames(n *yaml.Node) ([]string, error) {
	var names []string
	switch n.Kind {
	case yaml.ScalarNode:
		for _, v := range strings.Split(n.Value, ",") {
			if v = strings.TrimSpace(v); v != "" {
				names = append(names, v)
			}
		}
	case yaml.SequenceNode:
		for _, e := range n.Content {
			v, err := scenarios.ReadScalar(e)
			if err != nil {
				return nil, err
			}
			names = append(names, v)
		}
	default:
		return nil, fmt.Errorf("want a class name or a list of them, got a %s", scenarios.KindName(n))
	}
	return names, nil
}

// speedList reads validate.speed: a non-empty list of factors above 0.
func speedList(n *yaml.Node) ([]float64, error) {
	items, err := scenarios.ReadList(n, "validate.speed")
	if err != nil {
		return nil, err
	}
	out := make([]float64, 0, len(items))
	for i, it := range items {
		v, err := scenarios.ReadFloat(it, math.SmallestNonzeroFloat64, testbed.MaxSpeed, "a speed factor above 0, at most 100")
		if err != nil {
			return nil, fmt.Errorf("entry %d: %w", i+1, err)
		}
		out = append(out, v)
	}
	return out, nil
}

// wakeCurve reads validate.wake_curve: a list of [idle, wake-up]
// duration pairs.
func wakeCurve(n *yaml.Node) ([]testbed.WakePoint, error) {
	items, err := scenarios.ReadList(n, "validate.wake_curve")
	if err != nil {
		return nil, err
	}
	out := make([]testbed.WakePoint, 0, len(items))
	for i, it := range items {
		if it.Kind != yaml.SequenceNode || len(it.Content) != 2 {
			return nil, fmt.Errorf("entry %d: want a pair [idle, wake-up] of durations such as [40us, 15us]", i+1)
		}
		var p testbed.WakePoint
		if p.Idle, err = scenarios.ReadDuration(it.Content[0]); err != nil {
			return nil, fmt.Errorf("entry %d: idle: %w", i+1, err)
		}
		if p.Wake, err = scenarios.ReadDuration(it.Content[1]); err != nil {
			return nil, fmt.Errorf("entry %d: wake-up: %w", i+1, err)
		}
		out = append(out, p)
	}
	return out, nil
}

// idleBalanceValue reads validate.idle_balance: true (at every chance),
// false (never) or a positive duration (at most once per that).
func idleBalanceValue(n *yaml.Node) (never bool, every sim.Time, err error) {
	s, err := scenarios.ReadScalar(n)
	if err != nil {
		return false, 0, err
	}
	if on, err := strconv.ParseBool(s); err == nil {
		return !on, 0, nil
	}
	d, err := scenarios.ReadDuration(n)
	if err != nil || d <= 0 {
		return false, 0, fmt.Errorf("want true, false or a positive duration such as 50ms, got %q", s)
	}
	return false, d, nil
}
