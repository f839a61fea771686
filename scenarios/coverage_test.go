package scenarios

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/poolsim/poolsim/models/queueing"
	"github.com/poolsim/poolsim/models/system"
	"github.com/poolsim/poolsim/sim"
)

// mm3 is an M/M/3 at ρ = 0.9 on a transaction pooler: Poisson arrivals at
// 27/s, exponential 100 ms statements, one per transaction, no hop, no
// query_wait_timeout. Its wait for a server is Erlang C's: P(W > t) =
// C·e^(−(cμ−λ)t), so the wait p99 is ln(C/0.01)/(cμ−λ) = 1467.7 ms, and
// its queue relaxes slowly (1/(cμ(1−√ρ)²) = 12.7 s): 60 s is short.
func mm3(t *testing.T, seed int, duration string) Point {
	t.Helper()
	s, err := Parse([]byte(fmt.Sprintf(`name: mm3
seed: %d
workload:
  arrival_rate: 27/s
  duration: %s
  txns_per_session: 1
  stmts_per_txn: 1
  query: {dist: exp, mean: 100ms}
pooler:
  mode: transaction
  default_pool_size: 3
  max_client_conn: 100000
  query_wait_timeout: 0s
server:
  max_connections: 100
`, seed, duration)), "mm3")
	if err != nil {
		t.Fatal(err)
	}
	pts, err := s.Points()
	if err != nil {
		t.Fatal(err)
	}
	return pts[0]
}

func mm3Exact() (p99ms, wq float64) {
	c, wq, _ := queueing.ErlangC(3, 27, 0.1)
	return 1000 * math.Log(c/0.01) / (30 - 27), wq
}

func hasNote(r Row, prefix string) bool {
	for _, n := range r.Notes {
		if strings.HasPrefix(n, prefix) {
			return true
		}
	}
	return false
}

// The wait p99 a study reports holds the exact value in its interval about
// 95 % of the time, on 40 seeds of the M/M/3 at ρ = 0.9 over 60 s - with
// 40 replications, and with --precision 2% (which cannot be met: 200
// replications, and a note that the runs are too short). The mean of the
// replications' own p99s, with Student t's interval over them - what a
// study reported before - covers it in a few seeds: its p99 is that of a
// 60 s run, about a third too low. The means are unbiased too: the
// start-up check lengthens the automatic warm-up to half the run (MSER-5
// on the pilots cut 6 s on average, and left the means 4-8 % low).
//
// Measured (go test ./scenarios -run WaitP99IntervalCovers -v): 40
// replications cover 34 of 40, the mean of p99s 0, and 33 seeds note the
// runs as too short for the interval they get; --precision 2% covers 35
// of 40 (the mean of p99s 0) and notes every seed; Wq is 1.7 % and 1.5 %
// low on average. Ten replications cover only about 25 of 40: ten 60 s
// runs hold few of the long congested stretches that make this queue's
// tail, and a low estimate then comes with a narrow interval.
func TestWaitP99IntervalCovers(t *testing.T) {
	if testing.Short() {
		t.Skip("8,000 runs")
	}
	exact, wq := mm3Exact()
	wait, _ := system.FieldByName("wait_p99_ms")
	wW, _ := system.FieldByName("wait_W")
	for _, tc := range []struct {
		name      string
		study     Study
		min, note int
	}{
		{"40 replications", Study{Replications: 40}, 34, 0},
		{"precision 2%", Study{Precision: 0.02}, 34, 40},
	} {
		covered, before, noted := 0, 0, 0
		var wqBias, cut float64
		for seed := 1; seed <= 40; seed++ {
			rows, err := RunStudy(context.Background(), []Point{mm3(t, seed, "60s")}, tc.study, 0, nil)
			if err != nil {
				t.Fatal(err)
			}
			r := rows[0]
			est, half := r.Stat(wait)
			if math.Abs(est-exact) <= half {
				covered++
			}
			if m, h, _ := sim.MeanCI(r.Reps.Values(wait)); math.Abs(m-exact) <= h {
				before++
			}
			if hasNote(r, "runs too short") {
				noted++
			}
			m, _ := r.Stat(wW)
			wqBias += (m/wq - 1) / 40
			cut += r.Reps[0].WarmupMs / 40
		}
		t.Logf("%s: the pooled wait p99's interval covers %.1f ms in %d of 40 seeds, the mean of p99s' in %d; too-short note on %d; Wq %+.1f%% on average; warm-up %.1f s on average",
			tc.name, exact, covered, before, noted, 100*wqBias, cut/1000)
		if covered < tc.min || before > 10 {
			t.Errorf("%s: covered in %d of 40 (want %d at least), the mean of p99s in %d (want it to fail: 10 at most)", tc.name, covered, tc.min, before)
		}
		if noted < tc.note {
			t.Errorf("%s: %d of 40 seeds say the runs are too short, want %d", tc.name, noted, tc.note)
		}
		if math.Abs(wqBias) > 0.03 {
			t.Errorf("%s: Wq %+.1f%% off Erlang C's on average, want within 3%%", tc.name, 100*wqBias)
		}
	}
}

// Runs of 600 s are long enough for 2 %: no note says they are too short
// (the precision itself is out of reach of 200 replications for a p99, and
// a note says that).
func TestLongRunNeedsNoNote(t *testing.T) {
	if testing.Short() {
		t.Skip("600 runs of 600 s")
	}
	exact, _ := mm3Exact()
	wait, _ := system.FieldByName("wait_p99_ms")
	for seed := 1; seed <= 3; seed++ {
		rows, err := RunStudy(context.Background(), []Point{mm3(t, seed, "600s")}, Study{Precision: 0.02}, 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		r := rows[0]
		est, half := r.Stat(wait)
		t.Logf("seed %d: wait p99 %.1f ± %.1f ms (exact %.1f), %d replications, warm-up %.0f s, notes %q", seed, est, half, exact, len(r.Reps), r.Reps[0].WarmupMs/1000, r.Notes)
		if hasNote(r, "runs too short") || hasNote(r, "the start-up is in") {
			t.Errorf("seed %d: a 600 s run noted as too short: %q", seed, r.Notes)
		}
		if !hasNote(r, "precision not reached") {
			t.Errorf("seed %d: the p99 reached 2%% in %d replications, or no note says it did not: %q", seed, len(r.Reps), r.Notes)
		}
	}
}
