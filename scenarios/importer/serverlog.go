package importer

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// logEvent is one line of a PostgreSQL csvlog or jsonlog that import
// reads.
type logEvent struct {
	at        time.Time
	session   string // session_id
	user, db  string
	severity  string
	message   string
	backend   string // backend_type (PostgreSQL 13+), "" before
	zoneKnown bool   // at's zone was UTC, GMT or a numeric offset
}

// logFormat names a server log format.
type logFormat string

const (
	csvFormat  logFormat = "csvlog"
	jsonFormat logFormat = "jsonlog"
)

// csvlog columns (stable since PostgreSQL 9.0; later versions add columns
// at the end): log_time 0, user_name 1, database_name 2, process_id 3,
// connection_from 4, session_id 5, session_line_num 6, command_tag 7,
// session_start_time 8, virtual_transaction_id 9, transaction_id 10,
// error_severity 11, sql_state_code 12, message 13, ..., backend_type 23
// (13+).
const (
	csvTime, csvUser, csvDB, csvSession, csvSeverity, csvMessage, csvBackend = 0, 1, 2, 5, 11, 13, 23
	csvMinFields                                                             = 22
)

// readServerLog reads the events of one csvlog or jsonlog stream; name is
// the file in errors. The format is recognised from the content, and other
// formats (PostgreSQL's stderr log, a pgbench log, anything else) are
// refused with what they look like.
func readServerLog(name string, r io.Reader, each func(logEvent) error) (logFormat, error) {
	br := bufio.NewReaderSize(r, 1<<16)
	head, _ := br.Peek(4096)
	trimmed := bytes.TrimLeft(head, " \t\r\n\ufeff")
	if len(trimmed) == 0 {
		return "", fmt.Errorf("%w: --csvlog %s: the file is empty", ErrNoData, name)
	}
	if trimmed[0] == '{' {
		return jsonFormat, readJSONLog(name, br, each)
	}
	if err := sniffCSV(name, head); err != nil {
		return "", err
	}
	return csvFormat, readCSVLog(name, br, each)
}

var (
	stderrLogRE  = regexp.MustCompile(`^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(\.\d+)? [A-Za-z0-9+-]+ \[\d+\]`)
	pgbenchLogRE = regexp.MustCompile(`^\d+ \d+ (\d+|failed|skipped|serialization|deadlock) \d+ \d+ \d+`)
	logTimeRE    = regexp.MustCompile(`^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(\.\d+)? \S+$`)
)

// sniffCSV refuses a file that is plainly not a csvlog, saying what it
// looks like.
func sniffCSV(name string, head []byte) error {
	line, _, _ := bytes.Cut(bytes.TrimLeft(head, "\ufeff"), []byte("\n"))
	l := strings.TrimRight(string(line), "\r")
	switch {
	case stderrLogRE.MatchString(l) || strings.Contains(l, " LOG:  ") || strings.Contains(l, " ERROR:  "):
		return fmt.Errorf("%w: --csvlog %s looks like PostgreSQL's stderr log (line 1: %q); import reads csvlog or jsonlog: set log_destination = 'csvlog' and logging_collector = on, and give the .csv file",
			ErrFormat, name, clip(l, 80))
	case pgbenchLogRE.MatchString(l):
		return fmt.Errorf("%w: --csvlog %s looks like a pgbench log (line 1: %q): give it with --pgbench-log", ErrFormat, name, clip(l, 80))
	}
	first, _, comma := strings.Cut(l, ",")
	if !comma || !logTimeRE.MatchString(first) {
		return fmt.Errorf("%w: --csvlog %s is not a PostgreSQL csvlog or jsonlog (line 1 does not start with a log time and a comma: %q); set log_destination = 'csvlog' (or 'jsonlog', PostgreSQL 15+)",
			ErrFormat, name, clip(l, 80))
	}
	return nil
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

func readCSVLog(name string, r io.Reader, each func(logEvent) error) error {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	cr.ReuseRecord = true
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			var pe *csv.ParseError
			if errors.As(err, &pe) {
				return fmt.Errorf("%w: --csvlog %s: line %d: %v", ErrFormat, name, pe.StartLine, pe.Err)
			}
			return fmt.Errorf("--csvlog %s: %w", name, err)
		}
		line, _ := cr.FieldPos(0)
		if len(rec) < csvMinFields {
			return fmt.Errorf("%w: --csvlog %s: line %d has %d fields; a csvlog line has %d or more", ErrFormat, name, line, len(rec), csvMinFields)
		}
		at, known, err := parseLogTime(rec[csvTime])
		if err != nil {
			return fmt.Errorf("%w: --csvlog %s: line %d: %v", ErrFormat, name, line, err)
		}
		ev := logEvent{at: at, zoneKnown: known, user: rec[csvUser], db: rec[csvDB], session: rec[csvSession],
			severity: rec[csvSeverity], message: rec[csvMessage]}
		if len(rec) > csvBackend {
			ev.backend = rec[csvBackend]
		}
		if err := each(ev); err != nil {
			return err
		}
	}
}

// jsonLine is the part of a jsonlog line import reads.
type jsonLine struct {
	Timestamp string `json:"timestamp"`
	User      string `json:"user"`
	DBName    string `json:"dbname"`
	SessionID string `json:"session_id"`
	Severity  string `json:"error_severity"`
	Message   string `json:"message"`
	Backend   string `json:"backend_type"`
}

func readJSONLog(name string, r io.Reader, each func(logEvent) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 1<<16), 64<<20)
	n := 0
	for sc.Scan() {
		n++
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		var j jsonLine
		if err := json.Unmarshal(b, &j); err != nil {
			return fmt.Errorf("%w: --csvlog %s: line %d is not a jsonlog line: %v", ErrFormat, name, n, err)
		}
		if j.Timestamp == "" {
			return fmt.Errorf("%w: --csvlog %s: line %d has no timestamp: not a PostgreSQL jsonlog", ErrFormat, name, n)
		}
		at, known, err := parseLogTime(j.Timestamp)
		if err != nil {
			return fmt.Errorf("%w: --csvlog %s: line %d: %v", ErrFormat, name, n, err)
		}
		if err := each(logEvent{at: at, zoneKnown: known, user: j.User, db: j.DBName, session: j.SessionID,
			severity: j.Severity, message: j.Message, backend: j.Backend}); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("--csvlog %s: %w", name, err)
	}
	return nil
}

// parseLogTime reads a log time such as "2026-11-30 19:33:19.582 UTC". The
// zone is trusted when it is UTC, GMT or numeric (+03, -0530); another
// abbreviation (CET, EST) has no fixed meaning, so the time is read as if
// it were UTC and known is false: differences between the log's own times
// stay right, but they cannot be lined up with another source's window.
func parseLogTime(s string) (t time.Time, known bool, err error) {
	date, zone, ok := strings.Cut(strings.TrimSpace(s), " ")
	if ok {
		var clock string
		clock, zone, ok = strings.Cut(zone, " ")
		date += " " + clock
	}
	if !ok {
		return time.Time{}, false, fmt.Errorf("log time %q: want e.g. 2026-11-30 19:33:19.582 UTC", s)
	}
	t, err = time.Parse("2006-01-02 15:04:05.999999999", date)
	if err != nil {
		return time.Time{}, false, fmt.Errorf("log time %q: want e.g. 2026-11-30 19:33:19.582 UTC", s)
	}
	switch {
	case zone == "UTC" || zone == "GMT" || zone == "Z":
		return t, true, nil
	case len(zone) >= 3 && (zone[0] == '+' || zone[0] == '-'):
		off, err := zoneOffset(zone[1:])
		if err != nil {
			return time.Time{}, false, fmt.Errorf("log time %q: zone %q: %v", s, zone, err)
		}
		if zone[0] == '+' {
			off = -off
		}
		return t.Add(off), true, nil
	}
	return t, false, nil
}

// zoneOffset reads hh, hhmm or hh:mm.
func zoneOffset(z string) (time.Duration, error) {
	z = strings.ReplaceAll(z, ":", "")
	if len(z) != 2 && len(z) != 4 {
		return 0, fmt.Errorf("want +hh or +hhmm")
	}
	h, err := strconv.Atoi(z[:2])
	m := 0
	if err == nil && len(z) == 4 {
		m, err = strconv.Atoi(z[2:])
	}
	if err != nil || h > 15 || m > 59 {
		return 0, fmt.Errorf("want +hh or +hhmm")
	}
	return time.Duration(h)*time.Hour + time.Duration(m)*time.Minute, nil
}
