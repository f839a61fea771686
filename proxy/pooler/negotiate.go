package pooler

import (
	"bufio"
	"bytes"
	"fmt"

	"github.com/jackc/pgx/v5/pgproto3"
)

// Protocol version negotiation, as PostgreSQL 15 does it
// (ProcessStartupPacket, SendNegotiateProtocolVersion): a StartupMessage
// asking for protocol 3.x with x above 0 (libpq 18 can ask for 3.2), or
// carrying "_pq_." protocol options the proxy does not know (it knows
// none), is answered with NegotiateProtocolVersion - the newest version
// the proxy speaks, 3.0, and the "_pq_." options it did not take, in the
// order the client sent them - and the login goes on at 3.0. A major
// version other than 3 is refused with PostgreSQL's FATAL 0A000
// "unsupported frontend protocol M.m: server supports 3.0 to 3.0", written
// in the old protocol's format for a major version below 3, as PostgreSQL
// does. PgBouncer 1.18 accepts 3.1 without a word and refuses 3.2 ("bad
// packet header") and "_pq_." options ("unsupported startup parameter");
// PgBouncer 1.23 and later answer as PostgreSQL does.

// errStartupLayout is PostgreSQL's (and PgBouncer 1.23's) text for a
// StartupMessage whose parameter list does not end with its terminator at
// the packet's last byte.
const errStartupLayout = "invalid startup packet layout: expected terminator as last byte"

// decodeStartup reads a StartupMessage body (version, then name and value
// strings, then a terminating zero byte) as PostgreSQL does: a later value
// of a name wins. opts are the "_pq_." option names in packet order. bad
// is the refusal text when the layout is broken.
func decodeStartup(buf []byte) (params map[string]string, opts []string, bad string) {
	params = map[string]string{}
	rest := buf[4:]
	for {
		name, after, ok := bytes.Cut(rest, []byte{0})
		if !ok {
			return nil, nil, errStartupLayout // no terminator
		}
		if len(name) == 0 {
			if len(after) != 0 {
				return nil, nil, errStartupLayout // bytes past the terminator
			}
			return params, opts, ""
		}
		value, after, ok := bytes.Cut(after, []byte{0})
		if !ok {
			return nil, nil, errStartupLayout // a name without its value
		}
		k := string(name)
		if bytes.HasPrefix(name, []byte("_pq_.")) {
			if _, seen := params[k]; !seen {
				opts = append(opts, k)
			}
		}
		params[k] = string(value)
		rest = after
	}
}

// negotiation is what the proxy answers a StartupMessage of protocol
// version code carrying opts: nil when there is nothing to negotiate.
func negotiation(code uint32, opts []string) *pgproto3.NegotiateProtocolVersion {
	if code == protocol30 && len(opts) == 0 {
		return nil
	}
	// PostgreSQL sends the whole version number (0x00030000), which libpq
	// compares with the one it asked for.
	return &pgproto3.NegotiateProtocolVersion{NewestMinorProtocol: protocol30, UnrecognizedOptions: opts}
}

// unsupportedProtocol is PostgreSQL's refusal of a start-up packet whose
// major version is not 3.
func unsupportedProtocol(code uint32) *pgproto3.ErrorResponse {
	return fatal("0A000", fmt.Sprintf("unsupported frontend protocol %d.%d: server supports 3.0 to 3.0", code>>16, code&0xffff))
}

// sendRefusal writes e for a client that asked for protocol version code
// and flushes it: as an ErrorResponse, or for a major version below 3 in
// the old protocol's format ('E', "FATAL:  message\n", a zero byte), which
// is what PostgreSQL sends such a client.
func sendRefusal(w *bufio.Writer, code uint32, e *pgproto3.ErrorResponse) {
	if code>>16 >= 3 {
		sendFatal(w, e)
		return
	}
	b := []byte{'E'}
	b = append(b, e.Severity+":  "+e.Message+"\n"...)
	b = append(b, 0)
	_, _ = w.Write(b)
	_ = w.Flush()
}
