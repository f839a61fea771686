package importer

import "strings"

// stmtKind is what a statement does to the transaction state, as far as
// import needs to know.
type stmtKind uint8

const (
	kOther    stmtKind = iota
	kBegin             // BEGIN, START TRANSACTION
	kEnd               // COMMIT, END, ROLLBACK, ABORT (not ROLLBACK TO SAVEPOINT, not PREPARE TRANSACTION)
	kPrepared          // COMMIT PREPARED / ROLLBACK PREPARED: ends nothing in this session
)

// splitKinds splits SQL text into its top-level statements (on semicolons
// outside quotes, dollar quotes and comments) and says what each does to
// the transaction state. Empty statements are skipped. It never fails: text
// that does not end a quote is read to its end as that quote.
func splitKinds(sql string) []stmtKind {
	var out []stmtKind
	start := 0
	emit := func(end int) {
		if k, ok := classify(sql[start:end]); ok {
			out = append(out, k)
		}
		start = end + 1
	}
	for i := 0; i < len(sql); i++ {
		switch c := sql[i]; {
		case c == ';':
			emit(i)
		case c == '\'' || c == '"':
			i = skipQuoted(sql, i, c)
		case c == '-' && i+1 < len(sql) && sql[i+1] == '-':
			if j := strings.IndexByte(sql[i:], '\n'); j >= 0 {
				i += j
			} else {
				i = len(sql)
			}
		case c == '/' && i+1 < len(sql) && sql[i+1] == '*':
			i = skipBlockComment(sql, i)
		case c == '$':
			i = skipDollar(sql, i)
		}
	}
	if start < len(sql) {
		emit(len(sql))
	}
	return out
}

// skipQuoted returns the index of the quote closing the one at i (a
// doubled quote is part of the text), or the last index.
func skipQuoted(s string, i int, q byte) int {
	for j := i + 1; j < len(s); j++ {
		if s[j] == q {
			if j+1 < len(s) && s[j+1] == q {
				j++
				continue
			}
			return j
		}
	}
	return len(s) - 1
}

// skipBlockComment returns the index of the '/' ending the (nestable)
// comment opened at i, or the last index.
func skipBlockComment(s string, i int) int {
	depth := 0
	for j := i; j+1 < len(s); j++ {
		switch {
		case s[j] == '/' && s[j+1] == '*':
			depth++
			j++
		case s[j] == '*' && s[j+1] == '/':
			depth--
			j++
			if depth == 0 {
				return j
			}
		}
	}
	return len(s) - 1
}

// skipDollar skips a dollar-quoted string starting at i ($$...$$ or
// $tag$...$tag$); a '$' that does not open one (a parameter such as $1) is
// left alone.
func skipDollar(s string, i int) int {
	j := i + 1
	for j < len(s) && (s[j] == '_' || s[j] >= 'a' && s[j] <= 'z' || s[j] >= 'A' && s[j] <= 'Z' || j > i+1 && s[j] >= '0' && s[j] <= '9') {
		j++
	}
	if j >= len(s) || s[j] != '$' {
		return i
	}
	tag := s[i : j+1]
	if k := strings.Index(s[j+1:], tag); k >= 0 {
		return j + 1 + k + len(tag) - 1
	}
	return len(s) - 1
}

// classify says what one statement does; false for an empty one.
func classify(stmt string) (stmtKind, bool) {
	w := words(stmt, 3)
	if len(w) == 0 {
		return kOther, false
	}
	switch w[0] {
	case "BEGIN":
		return kBegin, true
	case "START":
		if len(w) > 1 && w[1] == "TRANSACTION" {
			return kBegin, true
		}
	case "COMMIT", "END", "ABORT":
		if len(w) > 1 && w[1] == "PREPARED" {
			return kPrepared, true
		}
		if w[0] == "COMMIT" && len(w) > 2 && w[1] == "AND" && w[2] == "CHAIN" {
			return kOther, true // ends one transaction and starts the next at once
		}
		return kEnd, true
	case "ROLLBACK":
		if len(w) > 1 && (w[1] == "TO" || w[1] == "PREPARED") {
			if w[1] == "PREPARED" {
				return kPrepared, true
			}
			return kOther, true
		}
		if len(w) > 2 && w[1] == "AND" && w[2] == "CHAIN" {
			return kOther, true
		}
		return kEnd, true
	}
	return kOther, true
}

// words returns up to n leading keywords of a statement, upper-cased,
// after comments and whitespace ("WORK" and "TRANSACTION" after BEGIN,
// COMMIT, ... are kept as written).
func words(stmt string, n int) []string {
	var out []string
	i := 0
	for i < len(stmt) && len(out) < n {
		c := stmt[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '(':
			i++
		case c == '-' && i+1 < len(stmt) && stmt[i+1] == '-':
			if j := strings.IndexByte(stmt[i:], '\n'); j >= 0 {
				i += j + 1
			} else {
				i = len(stmt)
			}
		case c == '/' && i+1 < len(stmt) && stmt[i+1] == '*':
			i = skipBlockComment(stmt, i) + 1
		case isWordByte(c):
			j := i
			for j < len(stmt) && isWordByte(stmt[j]) {
				j++
			}
			out = append(out, strings.ToUpper(stmt[i:j]))
			i = j
		default:
			return out
		}
	}
	return out
}

func isWordByte(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}
