package scenarios

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/poolsim/poolsim/models/system"
	"github.com/poolsim/poolsim/sim"
)

// The start-up check of a study (system's warmup.go tells the rule). An
// open workload's replications all start cold, so whatever the warm-up
// leaves of the start-up is in every one of them: more replications
// narrow the interval around it and never remove it. A study therefore
// asks, after its first batch, how much of its figures the start-up could
// still be (system.StartupBias at the 95 % bound of the correlation time)
// against what it can afford - a quarter of the precision asked, or
// without a goal a quarter of the relative half-width its p99 will have -
// and lengthens the warm-up until it is within that, at most to half the
// arrival period. At its end it says the runs are too short when the
// warm-up needed did not fit in that half, or when what the start-up can
// still be is more than half of what the study affords.

// affordable is the share of a figure the start-up may take in a study of
// n replications: a quarter of the precision asked, else a quarter of the
// relative half-width p99_ms has with reps, projected to n replications;
// 0 when nothing says. prec is the precision it is a share of.
func affordable(reps system.Replicated, st Study, n int) (target, prec float64, what string) {
	if st.Precision > 0 {
		return st.Precision / 4, st.Precision, fmt.Sprintf("the %g%% precision asked", 100*st.Precision)
	}
	f, _ := system.FieldByName("p99_ms")
	est, half := reps.Stat(f)
	if len(reps) < 2 || est <= 0 || half <= 0 {
		return 0, 0, ""
	}
	rel := half / est * math.Sqrt(float64(len(reps))/float64(max(n, len(reps))))
	return rel / 4, rel, fmt.Sprintf("p99_ms's ±%s interval", percent(rel))
}

// minCheck is the fewest replications the start-up check and notes read:
// with fewer, the correlation time's 95 % bound is too loose to say
// anything (8.5 times the estimate with four).
const minCheck = DefaultFirstBatch

// startupCheck is the first batch's verdict on an automatic warm-up: the
// longer cut to run the batch again with, when the start-up could leave
// more than the study affords at the pilots' cut (again false: keep it);
// whether that cut is the most it may be (capped), and the correlation
// time's bound it went by. A warm-up the scenario gives is the scenario's,
// and kept.
func startupCheck(c system.Config, batch system.Replicated, st Study, planned int, auto bool) (cut sim.Time, capped, again bool, tau float64) {
	if !auto || !c.Open() || len(batch) < minCheck {
		return 0, false, false, 0
	}
	_, up, ok := batch.CorrelationTime()
	target, _, _ := affordable(batch, st, planned)
	if !ok || target <= 0 {
		return 0, false, false, 0
	}
	cur := c.WarmupCut()
	if system.StartupBias(up, cur.Seconds(), c.Duration().Seconds()) <= target {
		return 0, false, false, up
	}
	cut, capped = system.WarmupFor(c, up, cur, target)
	return cut, capped, cut > cur, up
}

// notes are what a finished point's replications tell its reader: runs too
// short for what the study affords (capped: the start-up check, going by
// a correlation time of up to tau, needed more warm-up than half the
// arrival period), a start-up seen in the data, a precision goal not
// reached after limit replications.
func notes(c system.Config, reps system.Replicated, st Study, limit int, capped bool, tau float64) []string {
	if len(reps) < 2 {
		return nil
	}
	var out []string
	target, prec, what := affordable(reps, st, len(reps))
	if _, up, ok := reps.CorrelationTime(); ok && c.Open() && target > 0 && len(reps) >= minCheck {
		cut, end := c.WarmupCut().Seconds(), c.Duration().Seconds()
		switch b := system.StartupBias(up, cut, end); {
		case capped:
			out = append(out, fmt.Sprintf("runs too short for %s: the latencies stay correlated for up to %s, and the warm-up that would leave the start-up under a quarter of that does not fit in half the arrival period, so %s of %s were cut; a workload.duration of about %s would do",
				what, seconds(tau), seconds(cut), seconds(end), seconds(system.DurationFor(tau, target))))
		case b > prec/2:
			out = append(out, fmt.Sprintf("runs too short for %s: the latencies stay correlated for up to %s, so the start-up can still be %s of the figures measured from %s to %s; a workload.duration of about %s (or a longer workload.warmup) would do",
				what, seconds(up), percent(b), seconds(cut), seconds(end), seconds(system.DurationFor(up, target))))
		}
	}
	for _, name := range []string{"p99_ms", "wait_p99_ms"} {
		f, _ := system.FieldByName(name)
		bias, half, ok := reps.StartBias(f)
		est, _ := reps.Stat(f)
		if ok && est > 0 && math.Abs(bias) > half && math.Abs(bias)/est > prec/2 {
			word := "below"
			if bias > 0 {
				word = "above"
			}
			out = append(out, fmt.Sprintf("the start-up is in the figures: %s over the steady windows reads %s ± %s %s their second halves alone",
				name, percent(math.Abs(bias)/est), percent(half/est), word))
		}
	}
	if st.Precision > 0 && !precise(reps, st.Precision) {
		var got []string
		for _, name := range PrecisionFields {
			f, _ := system.FieldByName(name)
			est, half := reps.Stat(f)
			got = append(got, fmt.Sprintf("%s within %s", name, percent(half/math.Abs(est))))
		}
		out = append(out, fmt.Sprintf("precision not reached: %s after %d replications (--max-replications %d), not the %g%% asked",
			strings.Join(got, " and "), len(reps), limit, 100*st.Precision))
	}
	return out
}

// percent writes a share as a percentage with two significant digits.
func percent(x float64) string {
	switch {
	case x >= 0.1:
		return fmt.Sprintf("%.0f%%", 100*x)
	case x >= 0.01:
		return fmt.Sprintf("%.1f%%", 100*x)
	default:
		return fmt.Sprintf("%.2f%%", 100*x)
	}
}

// seconds writes s seconds as a short duration.
func seconds(s float64) string {
	d := time.Duration(s * float64(time.Second))
	switch {
	case d >= 10*time.Second:
		return d.Round(time.Second).String()
	case d >= time.Second:
		return d.Round(100 * time.Millisecond).String()
	default:
		return d.Round(time.Millisecond).String()
	}
}
