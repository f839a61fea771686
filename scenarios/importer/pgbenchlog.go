package importer

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"time"
)

// PgbenchFacts is what pgbench's -l logs say: per-transaction lines
// (client_id transaction_no time script_no time_epoch time_us
// [schedule_lag] [retries]) or aggregated ones (--aggregate-interval:
// interval_start num_transactions sum_latency sum_latency_2 min_latency
// max_latency ...). A transaction's latency is pgbench's: the whole script,
// its \sleep commands included.
type PgbenchFacts struct {
	Files      []string
	Window     Window
	Windowed   bool // the window came from the caller (else the log's own span)
	Aggregated bool

	Clients      int   // distinct client ids (per-transaction logs; 0 for aggregated ones)
	Txns         int64 // completed in the window
	Failed       int64 // failed (serialization, deadlock, other) in the window
	Skipped      int64 // skipped by --latency-limit in the window
	Mean, Stddev time.Duration
	Min, Max     time.Duration
	RateLimited  bool            // a schedule lag column was present (pgbench -R): an open workload
	Gaps         []time.Duration // a client's time from one transaction's end to its next one's start
}

// TxnsPerSec is the completion rate over the window.
func (f *PgbenchFacts) TxnsPerSec() float64 { return float64(f.Txns) / f.Window.Span().Seconds() }

// AnalyzePgbench reads pgbench logs; a transaction counts when it ends in
// [from, to] (zero values: the whole log).
func AnalyzePgbench(files []string, from, to time.Time) (*PgbenchFacts, error) {
	return analyzePgbench(files, func(name string) (io.ReadCloser, error) { return os.Open(name) }, from, to)
}

// analyzePgbench is AnalyzePgbench reading through open.
func analyzePgbench(files []string, open func(string) (io.ReadCloser, error), from, to time.Time) (*PgbenchFacts, error) {
	a := pgbenchAnalysis{from: from, to: to, clients: map[int64]time.Time{}}
	f := &a.f
	f.Files, f.Windowed = files, !from.IsZero() || !to.IsZero()
	for _, name := range files {
		r, err := open(name)
		if err != nil {
			return nil, fmt.Errorf("--pgbench-log: %w", err)
		}
		err = a.read(name, r)
		r.Close()
		if err != nil {
			return nil, err
		}
	}
	if a.lines == 0 {
		return nil, fmt.Errorf("%w: --pgbench-log %s: no lines", ErrNoData, strings.Join(files, ", "))
	}
	if f.Txns == 0 {
		return nil, fmt.Errorf("%w: --pgbench-log %s: no transaction completed in the window %s", ErrNoData, strings.Join(files, ", "), Window{From: from, To: to})
	}
	if !f.Windowed {
		from, to = a.lo, a.hi
	}
	f.Window = Window{From: from, To: to, Samples: int(f.Txns)}
	if f.Window.Span() <= 0 {
		return nil, fmt.Errorf("%w: --pgbench-log: the log spans no time", ErrNoData)
	}
	f.Clients = len(a.clients)
	n := float64(f.Txns)
	mean := a.sum / n
	f.Mean = time.Duration(mean * 1e3)
	f.Stddev = time.Duration(math.Sqrt(math.Max(a.sum2/n-mean*mean, 0)) * 1e3)
	return f, nil
}

type pgbenchAnalysis struct {
	f         PgbenchFacts
	from, to  time.Time
	lo, hi    time.Time // earliest start and latest end seen
	sum, sum2 float64   // latencies in µs
	lines     int
	perTxn    bool
	clients   map[int64]time.Time // each client's last transaction end
	aggLast   time.Time           // the latest aggregated interval's start
	aggStep   time.Duration       // the shortest step between aggregated intervals
}

func (a *pgbenchAnalysis) in(t time.Time) bool {
	return (a.from.IsZero() || !t.Before(a.from)) && (a.to.IsZero() || !t.After(a.to))
}

func (a *pgbenchAnalysis) read(name string, r io.Reader) error {
	br := bufio.NewReaderSize(r, 1<<16)
	n := 0
	for {
		text, err := br.ReadString('\n')
		if err != nil && err != io.EOF {
			return fmt.Errorf("--pgbench-log %s: %w", name, err)
		}
		if text == "" && err == io.EOF {
			return nil
		}
		n++
		partial := err == io.EOF // the last line, not finished: pgbench may still be writing it
		if perr := a.line(name, n, text); perr != nil && !partial {
			return perr
		}
		if partial {
			return nil
		}
	}
}

// line reads one line of a pgbench log.
func (a *pgbenchAnalysis) line(name string, n int, text string) error {
	line := strings.TrimSpace(text)
	if line == "" {
		return nil
	}
	if len(line) > 1<<16 {
		line = line[:1<<16]
	}
	fields := strings.Fields(line)
	bad := func(why string) error {
		return fmt.Errorf("%w: --pgbench-log %s: line %d (%q): %s; want pgbench -l lines (client_id transaction_no time script_no time_epoch time_us ...) or --aggregate-interval lines",
			ErrFormat, name, n, clip(line, 60), why)
	}
	if len(fields) < 6 {
		return bad(fmt.Sprintf("%d fields, at least 6 expected", len(fields)))
	}
	first, err := strconv.ParseInt(fields[0], 10, 64)
	if err != nil {
		return bad("the first field is not a whole number")
	}
	agg := first >= 100_000_000 // an epoch second, not a client id
	if a.lines > 0 && agg == a.perTxn {
		return bad("per-transaction and aggregated lines are mixed")
	}
	if agg {
		err = a.aggregated(fields)
	} else {
		err = a.transaction(first, fields)
	}
	if err != nil {
		return bad(err.Error())
	}
	a.perTxn = !agg
	a.f.Aggregated = agg
	a.lines++
	return nil
}

func nums(fields []string) ([]float64, error) {
	out := make([]float64, len(fields))
	for i, s := range fields {
		v, err := parseFinite(fmt.Sprintf("field %d", i+1), s)
		if err != nil {
			return nil, err
		}
		if v < 0 {
			return nil, fmt.Errorf("field %d is negative", i+1)
		}
		out[i] = v
	}
	return out, nil
}

// transaction reads: client_id transaction_no time script_no time_epoch
// time_us [schedule_lag] [retries]; time may be failed, skipped,
// serialization or deadlock.
func (a *pgbenchAnalysis) transaction(client int64, fields []string) error {
	if client < 0 {
		return fmt.Errorf("negative client id")
	}
	v, err := nums(fields[3:6])
	if err != nil {
		return err
	}
	if v[2] >= 1e6 {
		return fmt.Errorf("time_us %v is not below 1000000", v[2])
	}
	end := time.Unix(int64(v[1]), int64(v[2])*1000)
	if len(fields) >= 7 {
		a.f.RateLimited = true
	}
	switch fields[2] {
	case "failed", "serialization", "deadlock":
		if a.in(end) {
			a.f.Failed++
		}
		return nil
	case "skipped":
		if a.in(end) {
			a.f.Skipped++
		}
		return nil
	}
	lat, err := parseFinite("time", fields[2])
	if err != nil || lat < 0 || lat > 1e13 {
		return fmt.Errorf("the time field %q is not a latency in microseconds", fields[2])
	}
	start := end.Add(-time.Duration(lat * 1e3))
	if a.lo.IsZero() || start.Before(a.lo) {
		a.lo = start
	}
	if end.After(a.hi) {
		a.hi = end
	}
	prev, seen := a.clients[client]
	a.clients[client] = end
	if !a.in(end) {
		return nil
	}
	if seen && a.in(prev) {
		a.f.Gaps = append(a.f.Gaps, start.Sub(prev))
	}
	a.add(1, lat, lat*lat, lat, lat)
	return nil
}

// aggregated reads: interval_start num_transactions sum_latency
// sum_latency_2 min_latency max_latency [sum_lag sum_lag_2 min_lag max_lag
// [skipped]] [retried retries] [failures ...]. An interval counts when its
// start is in the window.
func (a *pgbenchAnalysis) aggregated(fields []string) error {
	v, err := nums(fields[:6])
	if err != nil {
		return err
	}
	if v[1] > 0 && (v[4] > v[5] || v[2] < v[1]*v[4]*(1-1e-9) || v[2] > v[1]*v[5]*(1+1e-9)) {
		return fmt.Errorf("min_latency %v, max_latency %v and sum_latency %v of %v transactions do not fit together", v[4], v[5], v[2], v[1])
	}
	start := time.Unix(int64(v[0]), 0)
	if len(fields) >= 10 {
		a.f.RateLimited = true
	}
	if a.lo.IsZero() || start.Before(a.lo) {
		a.lo = start
	}
	// The interval's length is not in the line: it is the step between
	// consecutive lines (a second until a second line says otherwise).
	if !a.aggLast.IsZero() {
		if d := start.Sub(a.aggLast); d > 0 && (a.aggStep == 0 || d < a.aggStep) {
			a.aggStep = d
		}
	}
	a.aggLast = maxTime(a.aggLast, start)
	step := a.aggStep
	if step == 0 {
		step = time.Second
	}
	a.hi = a.aggLast.Add(step)
	if !a.in(start) || v[1] == 0 {
		return nil
	}
	a.add(int64(v[1]), v[2], v[3], v[4], v[5])
	return nil
}

// add takes n transactions with latency sum, sum of squares, min and max
// (microseconds).
func (a *pgbenchAnalysis) add(n int64, sum, sum2, lo, hi float64) {
	f := &a.f
	if f.Txns == 0 || time.Duration(lo*1e3) < f.Min {
		f.Min = time.Duration(lo * 1e3)
	}
	f.Max = max(f.Max, time.Duration(hi*1e3))
	f.Txns += n
	a.sum += sum
	a.sum2 += sum2
}
