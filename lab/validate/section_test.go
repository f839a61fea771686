package validate

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/poolsim/poolsim/lab/testbed"
	"github.com/poolsim/poolsim/scenarios"
	"github.com/poolsim/poolsim/sim"
)

// decode parses scenario src and decodes its validate: section.
func decode(t *testing.T, src string, sets ...string) (Settings, error) {
	t.Helper()
	sc, err := scenarios.Parse([]byte(src), "x.yaml")
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	for _, kv := range sets {
		k, v, _ := strings.Cut(kv, "=")
		if err := sc.Set(k, v); err != nil {
			t.Fatalf("--set %s: %v", kv, err)
		}
	}
	return Decode(sc)
}

func TestDecodeSection(t *testing.T) {
	src := "name: x\nworkload: {clients: 1}\nserver: {cores: 2}\npooler: {cpu_per_assign: 4us}\n" +
		"validate:\n  driver_cpu: {dist: exp, mean: 300us}\n  pooler_on_cores: true\n  background: 0.25\n"
	s, err := decode(t, src)
	if err != nil {
		t.Fatal(err)
	}
	if m := s.Machine; m.DriverCPU != sim.ExpDist(300*sim.Microsecond) || !m.PoolerOnCores || m.Background != 0.25 {
		t.Errorf("decoded %+v", m)
	}
	if l := s.Live; l.Statement != "sleep" || l.Scale != 1 || l.Driver != "poolsim" || l.SQL != "" || l.WithHold != nil {
		t.Errorf("the live defaults: %+v", s.Live)
	}
	s, err = decode(t, src, "validate.background=1.5", "validate.driver_cpu=2ms", "validate.speed=[0.75, 1.25]",
		"validate.speed_period=20ms", "validate.scheduler=per_core", "validate.driver_threads=2", "validate.driver_scan=true",
		"validate.idle_scan=false", "validate.affinity=together", "validate.statement=pgbench-select", "validate.scale=3",
		"validate.driver=pgbench", "validate.with_hold=[a, b]")
	if err != nil {
		t.Fatal(err)
	}
	m := s.Machine
	if m.Background != 1.5 || m.DriverCPU != sim.ConstDist(2*sim.Millisecond) || !slices.Equal(m.Speed, []float64{0.75, 1.25}) ||
		m.SpeedPeriod != 20*sim.Millisecond || m.Scheduler != testbed.PerCore || m.DriverThreads != 2 || !m.DriverScan ||
		!m.NoIdleScan || m.Affinity != testbed.Together {
		t.Errorf("--set validate.*: the machine %+v", m)
	}
	if l := s.Live; l.Statement != "pgbench-select" || l.Scale != 3 || l.Driver != "pgbench" || !slices.Equal(l.WithHold, []string{"a", "b"}) {
		t.Errorf("--set validate.*: the live settings %+v", l)
	}
	for _, c := range []struct {
		v     string
		never bool
		every sim.Time
	}{{"false", true, 0}, {"50ms", false, 50 * sim.Millisecond}, {"true", false, 0}} {
		s, err := decode(t, src, "validate.scheduler=per_core", "validate.idle_balance="+c.v)
		if err != nil || s.Machine.NoIdleBalance != c.never || s.Machine.IdleBalanceEvery != c.every {
			t.Errorf("--set validate.idle_balance=%s: %v, got never %v, every %v", c.v, err, s.Machine.NoIdleBalance, s.Machine.IdleBalanceEvery)
		}
	}
	curve := "name: x\nworkload: {clients: 1}\nserver: {cores: 2}\nvalidate:\n  scheduler: per_core\n  wake_curve: [[40us, 15us], [130us, 45us]]\n"
	if s, err := decode(t, curve); err != nil || !slices.Equal(s.Machine.WakeCurve, []testbed.WakePoint{{Idle: 40 * sim.Microsecond, Wake: 15 * sim.Microsecond}, {Idle: 130 * sim.Microsecond, Wake: 45 * sim.Microsecond}}) {
		t.Errorf("a wake curve: %v, %v", err, s.Machine.WakeCurve)
	}
	help := strings.Join(Keys(), "\n")
	for _, k := range sectionKeys {
		if !strings.Contains(help, "validate."+k.key+" ") {
			t.Errorf("validate.%s is not in the key list", k.key)
		}
	}
}

func TestDecodeSectionErrors(t *testing.T) {
	base := "name: x\nworkload: {clients: 1}\nserver: {cores: 2}\nvalidate:\n"
	for _, tc := range []struct{ name, yaml, want string }{
		{"unknown key", base + "  statment: cpu\n", "x.yaml:5: unknown key \"statment\" in validate: want one of statement, scale,"},
		{"repeated key", base + "  statement: cpu\n  statement: sleep\n", "x.yaml:6: key validate.statement repeated (first on line 5)"},
		{"statement", base + "  statement: nap\n", `x.yaml:5: validate.statement: want sleep, cpu, sql or pgbench-select, got "nap"`},
		{"scale", base + "  scale: 0\n", "x.yaml:5: validate.scale: must be from 1 to 1000, got 0"},
		{"sql without its statement", base + "  statement: sql\n", "validate.sql must hold the statement to run with validate.statement: sql"},
		{"pgbench without pgbench-select", base + "  driver: pgbench\n", "validate.driver pgbench runs pgbench -S: it needs validate.statement pgbench-select, got sleep"},
		{"with_hold", base + "  with_hold: {a: 1}\n", "want a class name or a list of them, got a mapping"},
		{"testbed without cores", "name: x\nworkload: {clients: 1}\nvalidate:\n  driver_cpu: 1ms\n", "set server.cores above 0"},
		{"testbed background", base + "  background: 2.5\n", "validate.background: 2.5 is not below server.cores 2"},
		{"testbed bool", base + "  pooler_on_cores: sometimes\n", "x.yaml:5: validate.pooler_on_cores: want true or false"},
		{"testbed scheduler", base + "  scheduler: fair\n", `want shared or per_core, got "fair"`},
		{"testbed driver threads", base + "  driver_threads: 2\n", "validate.driver_threads is set without validate.driver_cpu"},
		{"testbed driver scan", base + "  driver_cpu: 10us\n  driver_scan: true\n", "validate.driver_scan is set without validate.driver_threads"},
		{"testbed affinity", base + "  affinity: pinned\n", `want free, together or apart, got "pinned"`},
		{"testbed wake curve without per-core queues", base + "  wake_curve: [[40us, 15us]]\n", "validate.wake_curve is an idle core's wake-up by how long it idled: it needs validate.scheduler per_core"},
		{"testbed wake curve not a pair", base + "  wake_curve: [40us, 15us]\n", "entry 1: want a pair [idle, wake-up] of durations such as [40us, 15us]"},
		{"testbed wake curve falling", base + "  scheduler: per_core\n  wake_curve: [[40us, 15us], [30us, 20us]]\n", "validate.wake_curve[1]: the idle times must rise point by point, got 30µs after 40µs"},
		{"testbed wake curve and wakeup", base + "  scheduler: per_core\n  wakeup: 10us\n  wake_curve: [[40us, 15us]]\n", "validate.wake_curve and validate.wakeup both set the idle core's wake-up: set one"},
		{"testbed idle balance off without per-core queues", base + "  idle_balance: false\n", "validate.idle_balance false keeps queued threads on their cores: it needs validate.scheduler per_core"},
		{"testbed idle scan off without per-core queues", base + "  idle_scan: false\n", "validate.idle_scan false stops a woken thread's look for an idle core: it needs validate.scheduler per_core"},
		{"testbed idle balance not a bool", base + "  scheduler: per_core\n  idle_balance: sometimes\n", "want true, false or a positive duration such as 50ms, got \"sometimes\""},
		{"testbed idle balance negative", base + "  scheduler: per_core\n  idle_balance: -5ms\n", "want true, false or a positive duration such as 50ms, got \"-5ms\""},
		{"testbed wakeup without per-core queues", base + "  wakeup: 20us\n", "validate.wakeup is an idle core's wake-up for a backend placed on it: it needs validate.scheduler per_core"},
		{"testbed affinity without per-core queues", base + "  affinity: apart\n  pooler_on_cores: true\n", "validate.affinity apart pins the pooler's thread and the backends to cores: it needs validate.scheduler per_core"},
		{"speed", base + "  speed: [1, 0]\n", "x.yaml:5: validate.speed: entry 2: want a speed factor above 0, at most 100"},
		{"speed not a list", base + "  speed: 1.5\n", "validate.speed must be a non-empty list"},
		{"the cores of a point of the sweep", "name: x\nworkload: {clients: 1}\nserver: {cores: 2}\nvalidate:\n  background: 1.5\nsweep:\n  server.cores: [2, 1]\n", "validate.background: 1.5 is not below server.cores 1"},
	} {
		_, err := decode(t, tc.yaml)
		if err == nil || !errors.Is(err, scenarios.ErrInvalid) || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v, want one line wrapping scenarios.ErrInvalid with %q", tc.name, err, tc.want)
		}
	}
	for _, tc := range []struct{ set, want string }{
		{"validate.bogus=1", "--set validate.bogus=1: unknown key `validate.bogus`"},
		{"validate.speed=[1, fast]", "--set validate.speed=[1, fast]: entry 2"},
		{"validate.server_tail=0.6", "want a share of the statement's CPU from 0 to 0.5"},
	} {
		if _, err := decode(t, base+"  statement: cpu\n", tc.set); err == nil || !errors.Is(err, scenarios.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("--set %s: %v, want an error with %q", tc.set, err, tc.want)
		}
	}
}

// TestBuiltinSections: every built-in scenario's validate: section
// decodes; the live ones say how to run them.
func TestBuiltinSections(t *testing.T) {
	for _, b := range scenarios.Builtins() {
		sc, err := scenarios.Builtin(b.Name)
		if err != nil {
			t.Fatal(err)
		}
		s, err := Decode(sc)
		if err != nil {
			t.Errorf("%s: %v", b.Name, err)
		}
		if strings.HasSuffix(b.Name, "-live") && sc.Validate.Node == nil {
			t.Errorf("%s: no validate: section", b.Name)
		}
		if b.Name == "pgbench-select-live" && (s.Live.Statement != "pgbench-select" || s.Live.Driver != "pgbench") {
			t.Errorf("%s: %+v", b.Name, s.Live)
		}
	}
}
