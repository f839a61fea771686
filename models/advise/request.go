package advise

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/poolsim/poolsim/models/compat"
	"github.com/poolsim/poolsim/models/poolmode"
	"github.com/poolsim/poolsim/models/system"
)

// Objective is what the answer makes best among the configurations that
// meet every class's bars.
type Objective uint8

const (
	// FewestConnections: the fewest server connections, summed over the
	// pools (the default: the server's connections are the budget every
	// pool and every console shares).
	FewestConnections Objective = iota
	// BestLatency: the lowest latency inside the budget, judged by the
	// class closest to its bar.
	BestLatency
)

var objectiveNames = [...]string{FewestConnections: "connections", BestLatency: "latency"}

func (o Objective) String() string { return objectiveNames[o] }

// ParseObjective reads "connections" or "latency".
func ParseObjective(s string) (Objective, error) {
	for i, n := range objectiveNames {
		if n == s {
			return Objective(i), nil
		}
	}
	return 0, fmt.Errorf("unknown objective %q: want connections (the fewest server connections) or latency (the best latency inside the budget)", s)
}

// Headroom is the part of max_connections the answer leaves free for
// consoles, migrations and deploys: a count, or a share of
// max_connections (rounded up).
type Headroom struct {
	Count int
	Share float64
}

// DefaultHeadroom is 10 % of max_connections.
var DefaultHeadroom = Headroom{Share: 0.10}

// ParseHeadroom reads a count ("5") or a share ("10%", "0.1").
func ParseHeadroom(s string) (Headroom, error) {
	s = strings.TrimSpace(s)
	bad := fmt.Errorf("headroom %q: want a count of connections (5) or a share of max_connections below 100%% (10%% or 0.1)", s)
	if strings.HasSuffix(s, "%") {
		x, err := strconv.ParseFloat(strings.TrimSuffix(s, "%"), 64)
		if err != nil || x < 0 || x >= 100 || math.IsNaN(x) {
			return Headroom{}, bad
		}
		return Headroom{Share: x / 100}, nil
	}
	if n, err := strconv.Atoi(s); err == nil {
		if n < 0 {
			return Headroom{}, bad
		}
		return Headroom{Count: n}, nil
	}
	x, err := strconv.ParseFloat(s, 64)
	if err != nil || x < 0 || x >= 1 || math.IsNaN(x) {
		return Headroom{}, bad
	}
	return Headroom{Share: x}, nil
}

// Of is the connections held back out of maxConnections.
func (h Headroom) Of(maxConnections int) int {
	if h.Share > 0 {
		return int(math.Ceil(h.Share * float64(maxConnections)))
	}
	return h.Count
}

func (h Headroom) String() string {
	if h.Share > 0 {
		return strconv.FormatFloat(100*h.Share, 'f', -1, 64) + "%"
	}
	return strconv.Itoa(h.Count)
}

// Need is what one class asks of the answer: the session features it
// uses, and its bars - p99 latency (of a request when the class runs
// requests, else of a transaction), p99 wait for a server, least steady
// throughput. A zero bar is not set.
type Need struct {
	Features []compat.Feature
	SLOP99   time.Duration
	MaxWait  time.Duration
	MinTPS   float64
}

// Request is what to advise on.
type Request struct {
	// Base is the scenario (with --set applied): its classes and pools,
	// or its one workload and pool.
	Base system.Config
	// Needs are by class name; a scenario without classes has one class,
	// named "". A class not named needs nothing beyond the defaults.
	Needs map[string]Need
	// Assume are changes to the application, by class name (--assume):
	// the feature each frees stops forcing session or direct pooling.
	Assume map[string][]Assumption
	// Modes limits the modes considered (nil: all four).
	Modes     []poolmode.Mode
	Objective Objective
	Headroom  Headroom
	// PoolSizes is the coarse grid of pool sizes to try before the answer
	// is refined to the exact smallest (nil: a logarithmic grid from 1 to
	// the pool's client connections).
	PoolSizes []int
	// ServerCores and Spindles feed the HikariCP rule of thumb; CoresSet
	// says ServerCores was given (else it is the scenario's server.cores,
	// or 2 with a note).
	ServerCores, Spindles int
	CoresSet              bool
}

// featureAliases are the --features names (short ones and compat's own).
var featureAliases = map[string]compat.Feature{
	"prepared":     compat.ProtocolPrepared,
	"set":          compat.SetReset,
	"with_hold":    compat.WithHoldCursors,
	"advisory":     compat.AdvisoryLocks,
	"sql_prepare":  compat.SQLPrepare,
	"listen":       compat.Listen,
	"transactions": compat.Transactions,
	"temp_tables":  compat.TempTables,
}

// FeatureNames are the accepted short names, for help and errors.
const FeatureNames = "prepared, sql_prepare, set, listen, advisory_locks, with_hold, temp_tables, transactions"

// ParseFeatures reads a comma-separated feature list ("" is none).
func ParseFeatures(s string) ([]compat.Feature, error) {
	var out []compat.Feature
	seen := map[compat.Feature]bool{}
	for _, w := range strings.Split(s, ",") {
		w = strings.TrimSpace(w)
		if w == "" {
			continue
		}
		f, ok := featureAliases[w]
		if !ok {
			var err error
			if f, err = compat.ParseFeature(w); err != nil {
				return nil, fmt.Errorf("unknown feature %q: want %s", w, FeatureNames)
			}
		}
		if !seen[f] {
			seen[f] = true
			out = append(out, f)
		}
	}
	return out, nil
}

// ParseModes reads a comma-separated list of pool modes.
func ParseModes(s string) ([]poolmode.Mode, error) {
	var out []poolmode.Mode
	for _, w := range strings.Split(s, ",") {
		w = strings.TrimSpace(w)
		if w == "" {
			continue
		}
		m, err := poolmode.Parse(w)
		if err != nil {
			return nil, fmt.Errorf("unknown mode %q: want direct, session, transaction or statement", w)
		}
		if !containsMode(out, m) {
			out = append(out, m)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no mode: want a comma-separated list of direct, session, transaction, statement")
	}
	return out, nil
}

func containsMode(ms []poolmode.Mode, m poolmode.Mode) bool {
	for _, x := range ms {
		if x == m {
			return true
		}
	}
	return false
}
