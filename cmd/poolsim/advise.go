package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/poolsim/poolsim/models/advise"
	"github.com/poolsim/poolsim/models/compat"
	"github.com/poolsim/poolsim/models/poolmode"
	"github.com/poolsim/poolsim/models/system"
	"github.com/poolsim/poolsim/scenarios"
	"github.com/poolsim/poolsim/scenarios/vary"
	"github.com/spf13/pflag"
)

func init() {
	register(command{name: "advise", short: "recommend a pool mode and pool size, with reasons", run: runAdvise})
}

const adviseHelp = `Usage: poolsim advise SCENARIO [--features LIST] [--slo-p99 DURATION] [--min-tps N]
                      [--pool-sizes VALUES] [--server-cores N] [--spindles N]
                      [--set key=value ...] [--seed N] [--format table|json]

Answers "which pool mode, and how big a pool?" for SCENARIO's workload:
simulates every mode (direct, session, transaction, statement) at every pool
size (pooler.default_pool_size; direct keeps the server's max_connections),
and prints the answer first, then the reasons with figures, the runner-up,
each mode's verdict and the classic rules of thumb beside the simulated
optimum.

How it decides:
  1. Modes that break a session feature in --features are dropped, unless a
     setting saves them: protocol-level prepared statements (prepared) work in
     transaction and statement pooling with max_prepared_statements > 0, so
     those modes are evaluated again with max_prepared_statements=200. More
     than one statement per transaction implies 'transactions', which
     statement pooling breaks.
  2. A point qualifies when no connection is refused, no client hits
     query_wait_timeout, every transaction finishes, p99 <= --slo-p99 and
     throughput >= --min-tps (when given).
  3. Per mode: the smallest qualifying pool within 5% of the mode's best
     qualifying throughput. Across modes: among those within 5% of the best
     throughput, the lowest p99 (ties: direct, session, transaction, statement).
  4. When nothing qualifies it says so and names the binding constraint.

The scenario's sweep: block is ignored (advise takes one workload: the
scenario's base values with --set applied).

--features (comma-separated): prepared (protocol-level prepared statements),
sql_prepare, set (session SET), listen, advisory_locks (session-level),
with_hold (cursors), temp_tables, transactions.

Examples:
  poolsim advise pgbouncer-modes --set workload.clients=200
  poolsim advise pgbouncer-modes --set workload.clients=200 --features prepared --slo-p99 100ms
  poolsim advise pgbouncer-modes --set workload.clients=200 --features advisory_locks
  poolsim advise my-app.yaml --features set,listen --slo-p99 50ms --min-tps 2000 --pool-sizes 5..60/5
  poolsim advise my-app.yaml --format json | jq .answer

Exit status: 0 success (also when no mode meets the SLO: the output says so),
1 failure, 2 usage error (bad flags, bad --features, --slo-p99 or
--pool-sizes, bad scenario).
`

func runAdvise(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := pflag.NewFlagSet("advise", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	format := fs.String("format", "table", "output format: table or json")
	seed := fs.Uint64("seed", 0, "random seed (default: the scenario's)")
	sets := fs.StringArray("set", nil, "override a scenario value by its dotted key: --set workload.clients=500")
	features := fs.String("features", "", "session features the application uses: "+advise.FeatureNames)
	slo := fs.String("slo-p99", "", "p99 transaction latency bound, e.g. 50ms (default: none)")
	minTPS := fs.Float64("min-tps", 0, "least acceptable throughput in transactions per second (default: none)")
	poolSizes := fs.String("pool-sizes", "", "default_pool_size values to try, as for sweep --vary (default 1..max_connections/log)")
	cores := fs.Int("server-cores", 2, "server CPU cores, for the HikariCP rule cores*2 + spindles (default: the scenario's server.cores, else 2)")
	spindles := fs.Int("spindles", 1, "server disks (effective spindles), for the HikariCP rule")
	workers := fs.Int("workers", 0, "points simulated at once (default: one per CPU)")
	fs.Usage = func() { fmt.Fprint(stderr, adviseHelp) }
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *format != "table" && *format != "json" {
		return usagef("--format %q: want table or json", *format)
	}
	if fs.NArg() != 1 {
		return usagef("want exactly one SCENARIO (a file or a built-in name), got %d arguments; see 'poolsim advise --help'", fs.NArg())
	}
	feats, err := advise.ParseFeatures(*features)
	if err != nil {
		return usagef("--features %q: %v", *features, err)
	}
	req := advise.Request{Features: feats, MinTPS: *minTPS, ServerCores: *cores, Spindles: *spindles}
	if *slo != "" {
		d, err := time.ParseDuration(*slo)
		if err != nil || d <= 0 {
			return usagef("--slo-p99 %q: want a duration above 0 such as 50ms or 1.5s", *slo)
		}
		req.SLOP99 = d
	}
	if *minTPS < 0 || math.IsNaN(*minTPS) || math.IsInf(*minTPS, 0) {
		return usagef("--min-tps %v: want a throughput of 0 or more", *minTPS)
	}
	if *cores < 1 || *spindles < 0 {
		return usagef("--server-cores %d --spindles %d: want at least 1 core and 0 or more spindles", *cores, *spindles)
	}
	if *workers < 0 {
		return usagef("--workers %d: want 0 (one per CPU) or more", *workers)
	}
	sc, err := loadScenario(fs.Arg(0), *sets, fs.Changed("seed"), *seed)
	if err != nil {
		return err
	}
	req.Base = sc.Base
	if !fs.Changed("server-cores") && sc.Base.Server.Cores > 0 {
		req.ServerCores = sc.Base.Server.Cores
	}
	if err := req.Base.Validate(); err != nil {
		return usagef("%s: %v", sc.Source, err)
	}
	spec := *poolSizes
	if spec == "" {
		spec = fmt.Sprintf("1..%d/log", max(1, req.Base.Server.MaxConnections))
	}
	sizes, _, err := vary.Ints(spec)
	if err != nil {
		return usagef("--pool-sizes %q: %v", spec, err)
	}
	for _, s := range sizes {
		if s < 1 || s > 100_000 {
			return usagef("--pool-sizes %q: pool size %d: want 1 to 100000", spec, s)
		}
	}
	req.PoolSizes = sizes
	a, err := advise.Run(req, func(cfgs []system.Config) []system.Result {
		pts := make([]scenarios.Point, len(cfgs))
		for i, c := range cfgs {
			pts[i] = scenarios.Point{Config: c}
		}
		rows := scenarios.Run(pts, *workers)
		out := make([]system.Result, len(rows))
		for i, r := range rows {
			out[i] = r.Result
		}
		return out
	})
	if err != nil {
		return usage(err)
	}
	if len(sc.Sweep) > 0 {
		var ks []string
		for _, ax := range sc.Sweep {
			ks = append(ks, ax.Key)
		}
		a.Notes = append(a.Notes, fmt.Sprintf("the scenario's sweep over %s is ignored: advise uses its base values (%s); change them with --set", strings.Join(ks, ", "), baseWords(req.Base)))
	}
	if *format == "json" {
		return writeAdviceJSON(stdout, sc, req, a)
	}
	return writeAdviceText(stdout, sc, req, a)
}

func baseWords(c system.Config) string {
	w := c.Workload
	load := fmt.Sprintf("%d clients", w.Clients)
	if w.Open() {
		load = fmt.Sprintf("%g sessions/s for %v", w.ArrivalRate, w.Duration)
	}
	return fmt.Sprintf("%s, %d transactions per session, %d statements per transaction, server max_connections %d", load, w.TxnsPerSession, w.StmtsPerTxn, c.Server.MaxConnections)
}

func featureList(fs []compat.Feature) string {
	if len(fs) == 0 {
		return "none"
	}
	var s []string
	for _, f := range fs {
		s = append(s, f.String())
	}
	return strings.Join(s, ", ")
}

// figures is one point's numbers in a line.
func figures(e *advise.Eval) string {
	m := e.Metrics
	s := fmt.Sprintf("%.1f tps, p50 %.2f ms, p99 %.2f ms, wait p99 %.2f ms, %d refused, %d timed out, %d server connections at peak",
		m.TPS, m.P50Ms, m.P99Ms, m.WaitP99Ms, m.ConnRefused, m.WaitTimeouts, m.ServerConns)
	if m.ServerMemPeakMB > 0 {
		s += fmt.Sprintf(" (%.0f MB of server memory)", m.ServerMemPeakMB)
	}
	return s
}

// answerWords is "transaction mode, default_pool_size=12 (with max_prepared_statements=200)".
func answerWords(e *advise.Eval, base system.Config) string {
	s := e.Mode.String() + " mode, " + e.Pool(base)
	if e.Mode == poolmode.Direct {
		s = "direct connections (no pooler), " + e.Pool(base)
	}
	if e.Saved {
		s += fmt.Sprintf(", with max_prepared_statements=%d", e.MaxPrepared)
	}
	return s
}

func constraintWords(req advise.Request) string {
	s := "no refusals, no timeouts (query_wait_timeout, app-pool acquire)"
	if req.SLOP99 > 0 {
		s += fmt.Sprintf(", p99 <= %v", req.SLOP99)
	}
	if req.MinTPS > 0 {
		s += fmt.Sprintf(", >= %g tps", req.MinTPS)
	}
	return s
}

func writeAdviceText(w io.Writer, sc *scenarios.Scenario, req advise.Request, a *advise.Advice) error {
	b := &strings.Builder{}
	p := func(format string, args ...any) { fmt.Fprintf(b, format+"\n", args...) }
	if a.Answer != nil {
		p("Answer: %s", answerWords(a.Answer, req.Base))
	} else {
		p("Answer: no mode and pool size meets the constraints (%s).", constraintWords(req))
		for _, s := range a.Binding {
			p("  binding: %s", s)
		}
	}
	p("")
	p("%s (seed %d): %s", sc.Name, req.Base.Seed, baseWords(req.Base))
	p("Features in use: %s; constraints: %s.", featureList(req.Features), constraintWords(req))
	for _, s := range a.Implied {
		p("Implied by the workload: %s.", s)
	}
	p("")
	if e := a.Answer; e != nil {
		p("Why:")
		p("  - %s: %s.", answerWords(e, req.Base), figures(e))
		if e.Mode != poolmode.Direct {
			var v *advise.Verdict
			for _, x := range a.Modes {
				if x.Option == e.Option {
					v = x
				}
			}
			if v != nil {
				p("  - the smallest pool within %.0f%% of %s's best qualifying throughput (%.1f tps).", advise.Tolerance*100, e.Mode, v.BestTPS)
			}
		}
		if e.Saved {
			p("  - protocol-level prepared statements need max_prepared_statements above 0 in %s pooling; the scenario has %d.", e.Mode, req.Base.Pooler.MaxPreparedStatements)
		}
		if r := a.RunnerUp; r != nil {
			d := (e.Metrics.TPS/r.Metrics.TPS - 1) * 100
			p("  - against the runner-up: %+.1f%% throughput, p99 %.2f ms vs %.2f ms.", d, e.Metrics.P99Ms, r.Metrics.P99Ms)
		}
		p("")
		if r := a.RunnerUp; r != nil {
			p("Runner-up: %s: %s.", answerWords(r, req.Base), figures(r))
		} else {
			p("Runner-up: none - no other mode qualifies.")
		}
		p("")
	}
	p("Modes:")
	for _, v := range a.Modes {
		p("  %-12s %s", v.Mode.String()+":", verdictWords(v, req))
	}
	p("")
	c := a.Classic
	at := "the simulated optimum"
	if a.Answer == nil {
		at = "the closest point"
	}
	p("Classic starting points, beside %s:", at)
	if c.TPS > 0 {
		p("  - Little's law L = λW: %.1f tps x %.3f ms of server time per transaction = %.1f server connections busy on average;", c.TPS, c.ServiceMs, c.LittleBusy)
		p("    holding a server for the whole transaction (%.3f ms with think and hops) = %.1f connections.", c.HeldMs, c.LittleHeld)
	}
	p("  - HikariCP cores*2 + spindles: %d*2 + %d = %d connections (--server-cores, --spindles).", c.Cores, c.Spindles, c.Hikari)
	if a.Answer != nil {
		if a.Answer.Mode == poolmode.Direct {
			p("  - simulated: direct connections, %d server connections at peak.", a.Answer.Metrics.ServerConns)
		} else {
			p("  - simulated: default_pool_size=%d (%d server connections at peak).", a.Answer.PoolSize, a.Answer.Metrics.ServerConns)
		}
	}
	for _, n := range a.Notes {
		p("Note: %s.", n)
	}
	p("")
	p("Evaluated:")
	if _, err := io.WriteString(w, b.String()); err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  mode\tpool\tmax_prepared\ttps\tp50_ms\tp99_ms\twait_p99_ms\trefused\ttimeouts\tserver_conns\tserver_mem_mb\tverdict")
	for _, v := range a.Modes {
		for _, e := range v.Evals {
			pool := strconv.Itoa(e.PoolSize)
			if e.Mode == poolmode.Direct {
				pool = "-"
			}
			verdict := "ok"
			if !e.Meets() {
				verdict = strings.Join(e.Fails, "; ")
			}
			if e == a.Answer {
				verdict += " <- answer"
			} else if e == a.RunnerUp {
				verdict += " <- runner-up"
			}
			m := e.Metrics
			fmt.Fprintf(tw, "  %s\t%s\t%d\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%s\t%s\n", e.Mode, pool, e.MaxPrepared, f1(m.TPS), f2(m.P50Ms), f2(m.P99Ms), f2(m.WaitP99Ms), m.ConnRefused, m.WaitTimeouts+m.AppTimeouts, m.ServerConns, f1(m.ServerMemPeakMB), verdict)
		}
	}
	return tw.Flush()
}

func verdictWords(v *advise.Verdict, req advise.Request) string {
	if !v.Allowed {
		return fmt.Sprintf("dropped: breaks %s; no pooler setting saves it (%s)", featureList(v.Broken), v.Workaround)
	}
	var s string
	if v.Saved {
		s = "saved by " + v.SavedBy + "; "
	}
	where := func(e *advise.Eval) string {
		if e.Mode == poolmode.Direct {
			return ""
		}
		return fmt.Sprintf(" at pool %d", e.PoolSize)
	}
	if v.Choice != nil {
		return s + fmt.Sprintf("qualifies%s: %.1f tps, p99 %.2f ms, wait p99 %.2f ms, %d server connections", where(v.Choice), v.Choice.Metrics.TPS, v.Choice.Metrics.P99Ms, v.Choice.Metrics.WaitP99Ms, v.Choice.Metrics.ServerConns)
	}
	if e := v.Closest; e != nil {
		return s + fmt.Sprintf("fails everywhere; closest%s: %s (%.1f tps, p99 %.2f ms)", where(e), strings.Join(e.Fails, ", "), e.Metrics.TPS, e.Metrics.P99Ms)
	}
	return s + "not evaluated"
}

// adviceJSON is the --format json document.
type adviceJSON struct {
	Scenario  string         `json:"scenario"`
	Seed      uint64         `json:"seed"`
	Features  []string       `json:"features"`
	Implied   []string       `json:"implied"`
	SLOP99Ms  float64        `json:"slo_p99_ms"`
	MinTPS    float64        `json:"min_tps"`
	PoolSizes []int          `json:"pool_sizes"`
	Answer    *evalJSON      `json:"answer"`
	RunnerUp  *evalJSON      `json:"runner_up"`
	NoneMeets bool           `json:"none_meets"`
	Binding   []string       `json:"binding"`
	Modes     []verdictJSON  `json:"modes"`
	Classic   advise.Classic `json:"classic"`
	Notes     []string       `json:"notes"`
	Evaluated []evalJSON     `json:"evaluated"`
}

type evalJSON struct {
	Mode        string         `json:"mode"`
	PoolSize    int            `json:"pool_size"`
	MaxPrepared int            `json:"max_prepared_statements"`
	Saved       bool           `json:"max_prepared_raised"`
	Meets       bool           `json:"meets"`
	Fails       []string       `json:"fails"`
	Metrics     system.Metrics `json:"metrics"`
}

type verdictJSON struct {
	Mode        string    `json:"mode"`
	MaxPrepared int       `json:"max_prepared_statements"`
	Allowed     bool      `json:"allowed"`
	Broken      []string  `json:"broken"`
	SavedBy     string    `json:"saved_by,omitempty"`
	Workaround  string    `json:"workaround,omitempty"`
	BestTPS     float64   `json:"best_tps"`
	Choice      *evalJSON `json:"choice"`
	Closest     *evalJSON `json:"closest"`
	Verdict     string    `json:"verdict"`
}

func toEvalJSON(e *advise.Eval) *evalJSON {
	if e == nil {
		return nil
	}
	return &evalJSON{Mode: e.Mode.String(), PoolSize: e.PoolSize, MaxPrepared: e.MaxPrepared, Saved: e.Saved, Meets: e.Meets(), Fails: append([]string{}, e.Fails...), Metrics: e.Metrics}
}

func writeAdviceJSON(w io.Writer, sc *scenarios.Scenario, req advise.Request, a *advise.Advice) error {
	out := adviceJSON{
		Scenario: sc.Name, Seed: req.Base.Seed, Features: []string{}, Implied: append([]string{}, a.Implied...),
		SLOP99Ms: float64(req.SLOP99) / 1e6, MinTPS: req.MinTPS, PoolSizes: req.PoolSizes,
		Answer: toEvalJSON(a.Answer), RunnerUp: toEvalJSON(a.RunnerUp), NoneMeets: a.Answer == nil,
		Binding: append([]string{}, a.Binding...), Classic: a.Classic, Notes: append([]string{}, a.Notes...),
		Evaluated: []evalJSON{},
	}
	for _, f := range a.Features {
		out.Features = append(out.Features, f.String())
	}
	for _, v := range a.Modes {
		vj := verdictJSON{Mode: v.Mode.String(), MaxPrepared: v.MaxPrepared, Allowed: v.Allowed, Broken: []string{}, SavedBy: v.SavedBy,
			Workaround: v.Workaround, BestTPS: v.BestTPS, Choice: toEvalJSON(v.Choice), Closest: toEvalJSON(v.Closest), Verdict: verdictWords(v, req)}
		for _, f := range v.Broken {
			vj.Broken = append(vj.Broken, f.String())
		}
		out.Modes = append(out.Modes, vj)
		for _, e := range v.Evals {
			out.Evaluated = append(out.Evaluated, *toEvalJSON(e))
		}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

func f1(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }
func f2(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }
