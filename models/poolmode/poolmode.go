package poolmode

import (
	"fmt"
	"strings"
)

// Mode is how a client is connected to PostgreSQL.
type Mode uint8

const (
	// Direct is no pooler at all: each client opens its own backend.
	Direct Mode = iota
	// Session pooling: a server is linked at the client's first request and
	// released when the client disconnects.
	Session
	// Transaction pooling: a server is linked at the first request of a
	// transaction and released when the transaction ends.
	Transaction
	// Statement pooling: a server is linked per statement; transaction
	// blocks are refused.
	Statement
)

// Modes lists every mode in a fixed order (the order of reports).
var Modes = []Mode{Direct, Session, Transaction, Statement}

var names = [...]string{Direct: "direct", Session: "session", Transaction: "transaction", Statement: "statement"}

func (m Mode) String() string {
	if int(m) < len(names) {
		return names[m]
	}
	return fmt.Sprintf("Mode(%d)", m)
}

// Parse reads a mode name as written in scenarios and on the command line.
func Parse(s string) (Mode, error) {
	for i, n := range names {
		if s == n {
			return Mode(i), nil
		}
	}
	return 0, fmt.Errorf("unknown pool mode %q: want one of %s", s, strings.Join(names[:], ", "))
}

// Pooled reports whether a pooler sits between client and server.
func (m Mode) Pooled() bool { return m != Direct }

// TxStatus is the transaction-status byte of a ReadyForQuery message.
type TxStatus byte

const (
	Idle    TxStatus = 'I' // not in a transaction block
	InBlock TxStatus = 'T' // in a transaction block
	Failed  TxStatus = 'E' // in a failed transaction block
)

// Decision is what to do with a linked server connection.
type Decision uint8

const (
	// Keep the server linked to its client.
	Keep Decision = iota
	// Release the server to the pool as it is: it goes to the oldest waiting
	// client, or to the front of the idle list (LIFO).
	Release
	// Reset the server (server_reset_query, DISCARD ALL by default), then
	// release it.
	Reset
	// Close the server connection: its state is unknown or unsafe to reuse.
	Close
	// Refuse: close the server and disconnect the client with
	// ErrTxBlockNotAllowed (statement mode saw a transaction block).
	Refuse
)

var decisionNames = [...]string{Keep: "keep", Release: "release", Reset: "reset", Close: "close", Refuse: "refuse"}

func (d Decision) String() string {
	if int(d) < len(decisionNames) {
		return decisionNames[d]
	}
	return fmt.Sprintf("Decision(%d)", d)
}

// NeedsServer reports whether a client message of the given protocol type
// byte needs a linked server (lazy assignment). As in PgBouncer every
// message of a logged-in client does, except Flush ('H'), which has nothing
// to flush while no server is linked, and Terminate ('X'), which ends the
// client. Direct clients always own their backend, so it returns false.
func (m Mode) NeedsServer(msgType byte) bool {
	if m == Direct {
		return false
	}
	switch msgType {
	case 'H', 'X':
		return false
	}
	return true
}

// AfterReady decides what happens to a linked server when it sends
// ReadyForQuery with the given status and outstanding requests (Sync or
// Query messages the client sent that the server has not answered yet)
// remain. In transaction and statement mode the server is released at
// status Idle with nothing outstanding; statement mode refuses a transaction
// block; session mode keeps the server until the client disconnects.
func (m Mode) AfterReady(status TxStatus, outstanding int) Decision {
	switch m {
	case Transaction:
		if status == Idle && outstanding == 0 {
			return Release
		}
		return Keep
	case Statement:
		if status != Idle {
			return Refuse
		}
		if outstanding == 0 {
			return Release
		}
		return Keep
	default: // Direct, Session
		return Keep
	}
}

// ClientGone decides what happens to the server linked to a client that
// disconnects. clean is true when the server is idle: its last
// ReadyForQuery said Idle, no request is outstanding and nothing is left
// unsent. A server left mid-query or inside a transaction is closed, never
// reused; a clean one is reset in session mode (its session state belongs
// to the client that left) and released as it is in the other modes.
func (m Mode) ClientGone(clean bool) Decision {
	if !clean {
		return Close
	}
	if m == Session {
		return Reset
	}
	return Release
}

// Texts of the errors a pooler sends, exactly as PgBouncer words them. Each
// goes out as a FATAL ErrorResponse with SQLSTATE 08P01 (SQLStatePooler),
// and the client connection is closed after it.
const (
	ErrTxBlockNotAllowed = "transaction blocks not allowed in statement pooling mode"
	ErrMaxClientConn     = "no more connections allowed (max_client_conn)"
	ErrQueryWaitTimeout  = "query_wait_timeout"
	// ErrServerLoginFailing is PgBouncer 1.18's text for a client that
	// needs a server while the pool has none and its last login failed
	// (check_fast_fail in src/objects.c).
	ErrServerLoginFailing = "server login has been failing, try again later (server_login_retry)"
	SQLStatePooler        = "08P01"
)

// PostgreSQL's own refusal when max_connections are in use.
const (
	ErrTooManyClients   = "sorry, too many clients already"
	SQLStateTooManyConn = "53300"
)
