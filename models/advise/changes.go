package advise

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/poolsim/poolsim/models/compat"
)

// Change is a change to the application that frees a session feature, so
// that the feature no longer forces session or direct pooling.
type Change struct {
	Name    string         // its --assume name
	Feature compat.Feature // the feature it frees
	What    string         // what to change, in words
}

// Changes are the changes advise knows, one per feature that can be freed
// (multi-statement transactions cannot: only statement pooling breaks
// them, and nothing makes it keep them).
var Changes = []Change{
	{"xact_locks", compat.AdvisoryLocks, "take transaction-level advisory locks (pg_advisory_xact_lock; with_advisory_lock's transaction: true) instead of session-level ones"},
	{"listen_direct", compat.Listen, "give LISTEN one dedicated direct connection per application process (ActionCable's PostgreSQL adapter keeps one per process) and send everything else through the pool"},
	{"set_local", compat.SetReset, "use SET LOCAL inside each transaction, or pass the setting as a startup parameter (options=-c name=value)"},
	{"max_prepared", compat.ProtocolPrepared, "set max_prepared_statements above 0 (PgBouncer 1.21+), or turn the driver's prepared-statement cache off (pgjdbc prepareThreshold=0, Rails prepared_statements: false)"},
	{"protocol_prepare", compat.SQLPrepare, "prepare through the protocol (the driver's prepared statements, with max_prepared_statements above 0) instead of SQL PREPARE"},
	{"close_cursors", compat.WithHoldCursors, "close WITH HOLD cursors before the transaction ends, or read them inside one transaction"},
	{"on_commit_drop", compat.TempTables, "create temporary tables ON COMMIT DROP and use each within one transaction"},
}

// ChangeFor is the change that frees feature f, if any.
func ChangeFor(f compat.Feature) (Change, bool) {
	for _, c := range Changes {
		if c.Feature == f {
			return c, true
		}
	}
	return Change{}, false
}

func changeNames() string {
	var ns []string
	for _, c := range Changes {
		ns = append(ns, c.Name)
	}
	return strings.Join(ns, ", ")
}

// Assumption is one --assume: a change the application makes. Listeners
// is, for listen_direct, how many application processes keep a dedicated
// LISTEN connection (each one server connection of the budget).
type Assumption struct {
	Change    Change
	Listeners int
}

func (a Assumption) String() string {
	if a.Change.Name == "listen_direct" {
		return fmt.Sprintf("%s:%d", a.Change.Name, a.Listeners)
	}
	return a.Change.Name
}

// ParseAssume reads one --assume value: CLASS=CHANGE[,CHANGE...], or
// CHANGE for a scenario without classes; listen_direct takes the number
// of listening processes, listen_direct:N.
func ParseAssume(v string) (class string, as []Assumption, err error) {
	list := v
	if k, rest, ok := strings.Cut(v, "="); ok {
		class, list = strings.TrimSpace(k), rest
	}
	for _, w := range strings.Split(list, ",") {
		w = strings.TrimSpace(w)
		if w == "" {
			continue
		}
		name, arg, hasArg := strings.Cut(w, ":")
		var a Assumption
		found := false
		for _, c := range Changes {
			if c.Name == name {
				a.Change, found = c, true
			}
		}
		if !found {
			return "", nil, fmt.Errorf("--assume %q: unknown change %q: want one of %s", v, name, changeNames())
		}
		switch {
		case name == "listen_direct":
			n, err := strconv.Atoi(arg)
			if !hasArg || err != nil || n < 1 {
				return "", nil, fmt.Errorf("--assume %q: listen_direct needs the number of application processes that LISTEN, each with one direct connection: listen_direct:4", v)
			}
			a.Listeners = n
		case hasArg:
			return "", nil, fmt.Errorf("--assume %q: %s takes no argument", v, name)
		}
		as = append(as, a)
	}
	if len(as) == 0 {
		return "", nil, fmt.Errorf("--assume %q: no change: want CLASS=CHANGE with CHANGE one of %s", v, changeNames())
	}
	return class, as, nil
}
