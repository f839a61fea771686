// Package compat is the session-feature compatibility matrix of each pool
// mode: which features an application may rely on and which the mode
// breaks. It follows PgBouncer's feature table
// (https://www.pgbouncer.org/features.html, copied in docs/pgbouncer-rules.md
// §2): statement pooling is transaction pooling that also refuses
// transaction blocks, and protocol-level prepared statements survive
// transaction pooling only when max_prepared_statements is above 0.
package compat

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/poolsim/poolsim/models/poolmode"
)

// Feature is a session feature an application may use.
type Feature uint8

const (
	Transactions     Feature = iota // multi-statement transaction blocks
	SetReset                        // session SET / RESET
	Listen                          // LISTEN
	SQLPrepare                      // SQL-level PREPARE / EXECUTE
	ProtocolPrepared                // protocol-level named prepared statements
	AdvisoryLocks                   // session-level advisory locks
	WithHoldCursors                 // WITH HOLD cursors
	TempTables                      // PRESERVE/DELETE ROWS temporary tables
)

// Features lists every feature in report order.
var Features = []Feature{Transactions, SetReset, Listen, SQLPrepare, ProtocolPrepared, AdvisoryLocks, WithHoldCursors, TempTables}

var featureNames = [...]string{
	Transactions: "transactions", SetReset: "set_reset", Listen: "listen", SQLPrepare: "sql_prepare",
	ProtocolPrepared: "protocol_prepared", AdvisoryLocks: "advisory_locks", WithHoldCursors: "with_hold_cursors",
	TempTables: "temp_tables",
}

func (f Feature) String() string {
	if int(f) < len(featureNames) {
		return featureNames[f]
	}
	return fmt.Sprintf("Feature(%d)", f)
}

// ParseFeature reads a feature name.
func ParseFeature(s string) (Feature, error) {
	for i, n := range featureNames {
		if n == s {
			return Feature(i), nil
		}
	}
	return 0, fmt.Errorf("unknown session feature %q: want one of %s", s, strings.Join(featureNames[:], ", "))
}

// Works reports whether feature f keeps working in mode m with the given
// max_prepared_statements setting.
func Works(m poolmode.Mode, maxPrepared int, f Feature) bool {
	switch m {
	case poolmode.Direct, poolmode.Session:
		return true
	case poolmode.Transaction:
		return f == Transactions || (f == ProtocolPrepared && maxPrepared > 0)
	case poolmode.Statement:
		return f == ProtocolPrepared && maxPrepared > 0
	}
	return false
}

// Matrix is one mode's row: for each feature in Features order, whether it
// works.
type Matrix [8]bool

// For returns the matrix of mode m.
func For(m poolmode.Mode, maxPrepared int) Matrix {
	var x Matrix
	for _, f := range Features {
		x[f] = Works(m, maxPrepared, f)
	}
	return x
}

// Word is "ok" or "broken".
func Word(ok bool) string {
	if ok {
		return "ok"
	}
	return "broken"
}

// MarshalJSON writes the matrix as an object in Features order.
func (x Matrix) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, f := range Features {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%q:%q", f.String(), Word(x[f]))
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}
