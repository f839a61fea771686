package pooler

import (
	"encoding/hex"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5/pgproto3"
)

// table is one console result set, typed as PgBouncer types it: each
// column has a kind letter of PgBouncer's pktbuf_write_RowDescription
// format ('s' text, 'i' int4, 'q' int8, 'N' numeric, 'T' a timestamp sent
// as text, 'b' bytea). Values are sent in text format; a nil cell is SQL
// NULL, where PgBouncer sends NULL (a NULL string pointer, a bytea of
// length -1).
type table struct {
	names []string
	kinds string
	rows  [][]any
}

// newTable starts a result set: kinds has one letter per name.
func newTable(kinds string, names ...string) *table {
	if len(kinds) != len(names) {
		panic(fmt.Sprintf("console table: %d kinds for %d columns", len(kinds), len(names)))
	}
	return &table{names: names, kinds: kinds}
}

// row adds a row: a string (or nil) for 's' and 'T', an integer for 'i',
// 'q' and 'N', a []byte (or nil) for 'b'.
func (t *table) row(vals ...any) {
	if len(vals) != len(t.names) {
		panic(fmt.Sprintf("console table: %d values for %d columns", len(vals), len(t.names)))
	}
	t.rows = append(t.rows, vals)
}

// kindOID is the type PgBouncer declares for each kind letter.
func kindOID(k byte) (oid uint32, size int16) {
	switch k {
	case 'i':
		return 23, 4 // int4
	case 'q':
		return 20, 8 // int8
	case 'N':
		return 1700, -1 // numeric
	case 'b':
		return 17, -1 // bytea
	default:
		return 25, -1 // text ('s', and 'T', a timestamp written as text)
	}
}

// encode appends RowDescription, the DataRows, CommandComplete SHOW and
// ReadyForQuery to b.
func (t *table) encode(b []byte) []byte {
	fields := make([]pgproto3.FieldDescription, len(t.names))
	for i, n := range t.names {
		oid, size := kindOID(t.kinds[i])
		fields[i] = pgproto3.FieldDescription{Name: []byte(n), DataTypeOID: oid, DataTypeSize: size, TypeModifier: -1}
	}
	b, _ = (&pgproto3.RowDescription{Fields: fields}).Encode(b)
	vals := make([][]byte, len(t.names))
	for _, r := range t.rows {
		for i, v := range r {
			vals[i] = cellText(v)
		}
		b, _ = (&pgproto3.DataRow{Values: vals}).Encode(b)
	}
	return commandReady(b, "SHOW")
}

// cellText is a value in the text format; nil for NULL.
func cellText(v any) []byte {
	switch x := v.(type) {
	case nil:
		return nil
	case string:
		return []byte(x)
	case int:
		return strconv.AppendInt(nil, int64(x), 10)
	case int64:
		return strconv.AppendInt(nil, x, 10)
	case uint64:
		return strconv.AppendUint(nil, x, 10)
	case bool:
		if x {
			return []byte("1")
		}
		return []byte("0")
	case []byte:
		if x == nil {
			return nil
		}
		return append([]byte(`\x`), hex.EncodeToString(x)...)
	default:
		panic(fmt.Sprintf("console table: a %T cell", v))
	}
}

// commandReady appends CommandComplete tag and ReadyForQuery (idle).
func commandReady(b []byte, tag string) []byte {
	b, _ = (&pgproto3.CommandComplete{CommandTag: []byte(tag)}).Encode(b)
	b, _ = (&pgproto3.ReadyForQuery{TxStatus: 'I'}).Encode(b)
	return b
}

// consoleError is PgBouncer's admin_error: a non-fatal ERROR 08P01 (with no
// unlocalized severity, as PgBouncer writes it) and ReadyForQuery.
func consoleError(b []byte, msg string) []byte {
	b, _ = (&pgproto3.ErrorResponse{Severity: "ERROR", Code: "08P01", Message: msg}).Encode(b)
	b, _ = (&pgproto3.ReadyForQuery{TxStatus: 'I'}).Encode(b)
	return b
}

// consoleNotice is PgBouncer's pktbuf_write_Notice: a NOTICE with code
// 00000.
func consoleNotice(b []byte, msg, detail string) []byte {
	b, _ = (&pgproto3.NoticeResponse{Severity: "NOTICE", Code: "00000", Message: msg, Detail: detail}).Encode(b)
	return b
}
