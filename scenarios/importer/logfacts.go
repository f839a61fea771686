package importer

import (
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// LogOptions says which part of a server log to read.
type LogOptions struct {
	// Database keeps only this database's sessions; "" takes the database
	// with the most round trips.
	Database string
	// From and To bound the window (a round trip counts when it ends in
	// it); zero values take the whole log.
	From, To time.Time
}

// LogFacts is what a PostgreSQL csvlog or jsonlog says about one
// database: its round trips (a simple query, or parse/bind/execute up to an
// execute), how they group into transactions, the gaps between them, and
// its sessions. Log times have millisecond resolution (PostgreSQL writes
// no finer), so gaps are good as means over many, each within ±1 ms;
// durations are the server's own, to the microsecond.
type LogFacts struct {
	Files          []string
	Format         logFormat
	Database       string
	Users          []string
	OtherDatabases []string
	Window         Window
	ZoneKnown      bool // every time had a zone that can be lined up with another source's clock
	Windowed       bool // the window came from LogOptions (else the log's own span)

	RoundTrips   []time.Duration // durations of the round trips that ended in the window
	Txns         int             // transactions that began and ended in the window
	TxnTrips     int             // their round trips
	InTxnGaps    []time.Duration // from one round trip's end to the next one's start, inside a transaction
	BetweenGaps  []time.Duration // from a transaction's end to the same session's next one's start
	TxnHold      time.Duration   // sum over transactions of first start to last end
	Sessions     int             // sessions of the database seen in the window
	Arrivals     int             // sessions authorized in the window
	Departures   int             // sessions that disconnected in the window
	OpenMean     float64         // time-average number of open sessions in the window
	SessionTxns  []int           // transactions of each session that began and ended in the window
	ConnectTimes []time.Duration // connection received to authorized
	Errors       int             // ERROR and FATAL lines of the database's sessions
	Extended     bool            // extended-protocol (parse/bind/execute) lines were seen
	Textless     int             // round trips whose statement text was not logged (log_duration without log_statement)
	Housekeeping int             // pooler housekeeping left out (DISCARD ALL, empty queries, PgBouncer's SETs) and import's own statements
	Durations    int             // duration lines in the whole log, every database
	Connections  bool            // connection lines were logged (log_connections)
}

// MeanTrip is the mean round-trip duration.
func (f *LogFacts) MeanTrip() time.Duration { return meanDur(f.RoundTrips) }

// TripsPerTxn is round trips per transaction.
func (f *LogFacts) TripsPerTxn() float64 { return float64(f.TxnTrips) / float64(f.Txns) }

// TxnsPerSec is the rate of transactions in the window.
func (f *LogFacts) TxnsPerSec() float64 { return float64(f.Txns) / f.Window.Span().Seconds() }

func meanDur(xs []time.Duration) time.Duration {
	if len(xs) == 0 {
		return 0
	}
	var s float64
	for _, x := range xs {
		s += float64(x)
	}
	return time.Duration(s / float64(len(xs)))
}

var (
	durationRE   = regexp.MustCompile(`^duration: ([0-9]+(?:\.[0-9]+)?) ms(?:  (statement|parse|bind|execute|fastpath function call)(?: ([^:]*))?: ?([\s\S]*))?$`)
	statementRE  = regexp.MustCompile(`^(?:statement|execute [^:]*): ([\s\S]*)$`)
	sessionEndRE = regexp.MustCompile(`^disconnection: session time: `)
)

// roundTrip is one client request as the server logged it.
type roundTrip struct {
	start, end time.Time
	dur        time.Duration
	text       string
	hasText    bool
}

// openTxn is a transaction in progress on a session.
type openTxn struct {
	start, lastEnd time.Time
	trips          int
	gaps           []time.Duration
}

// session is one backend's state while reading.
type session struct {
	db, user         string
	received, opened time.Time
	first, last      time.Time
	closed           bool
	inBlock          bool
	cur              *openTxn
	lastTxnEnd       time.Time
	txns             int
	pending          time.Duration // parse and bind time of the round trip under way
	pendStart        time.Time
	hasPending       bool
	lastText         string
	hasLastText      bool
	arrivedInWindow  bool
	departedInWindow bool
	own              bool // import's own session (--pg): not a client
}

// dbFacts accumulates one database's facts.
type dbFacts struct {
	LogFacts
	users map[string]bool
}

// AnalyzeLogs reads csvlog or jsonlog files (in the order given, which
// should be the order they were written) and works out the facts of one
// database.
func AnalyzeLogs(files []string, opt LogOptions) (*LogFacts, error) {
	return analyzeLogs(files, func(name string) (io.ReadCloser, error) { return os.Open(name) }, opt)
}

// analyzeLogs is AnalyzeLogs reading through open.
func analyzeLogs(files []string, open func(string) (io.ReadCloser, error), opt LogOptions) (*LogFacts, error) {
	a := &logAnalysis{opt: opt, sessions: map[string]*session{}, dbs: map[string]*dbFacts{}, zoneKnown: true}
	var format logFormat
	for _, name := range files {
		f, err := open(name)
		if err != nil {
			return nil, fmt.Errorf("--csvlog: %w", err)
		}
		fm, err := readServerLog(name, f, a.event)
		f.Close()
		if err != nil {
			return nil, err
		}
		if format != "" && fm != format {
			return nil, fmt.Errorf("%w: --csvlog: %s is a %s and an earlier file a %s; give files of one format", ErrFormat, name, fm, format)
		}
		format = fm
	}
	return a.finish(files, format)
}

type logAnalysis struct {
	opt       LogOptions
	sessions  map[string]*session
	order     []string // sessions in order of appearance
	dbs       map[string]*dbFacts
	zoneKnown bool
	first     time.Time
	last      time.Time
	durations int
	conns     bool
}

func (a *logAnalysis) inWindow(t time.Time) bool {
	if a.opt.From.IsZero() && a.opt.To.IsZero() {
		return true
	}
	return !t.Before(a.opt.From) && !t.After(a.opt.To)
}

func (a *logAnalysis) db(name string) *dbFacts {
	d := a.dbs[name]
	if d == nil {
		d = &dbFacts{users: map[string]bool{}}
		d.Database = name
		a.dbs[name] = d
	}
	return d
}

// event takes one log line.
func (a *logAnalysis) event(ev logEvent) error {
	if !ev.zoneKnown {
		a.zoneKnown = false
	}
	if a.first.IsZero() || ev.at.Before(a.first) {
		a.first = ev.at
	}
	if ev.at.After(a.last) {
		a.last = ev.at
	}
	msg := ev.message
	if strings.HasPrefix(msg, "duration: ") {
		a.durations++
	}
	if ev.session == "" {
		return nil
	}
	s := a.sessions[ev.session]
	if s == nil {
		s = &session{first: ev.at}
		a.sessions[ev.session] = s
		a.order = append(a.order, ev.session)
	}
	s.last = ev.at
	if s.db == "" && ev.db != "" {
		s.db, s.user = ev.db, ev.user
	}
	switch {
	case strings.HasPrefix(msg, "connection received: "):
		s.received = ev.at
		a.conns = true
		return nil
	case strings.HasPrefix(msg, "connection authorized: "):
		s.opened = ev.at
		a.conns = true
		if a.inWindow(ev.at) {
			s.arrivedInWindow = true
		}
		if !s.received.IsZero() && s.db != "" {
			a.db(s.db).ConnectTimes = append(a.db(s.db).ConnectTimes, ev.at.Sub(s.received))
		}
		return nil
	case sessionEndRE.MatchString(msg):
		s.closed = true
		s.cur = nil // a transaction cut by the disconnection is not counted
		if a.inWindow(ev.at) {
			s.departedInWindow = true
		}
		return nil
	}
	if s.db == "" {
		return nil // background workers and the like
	}
	d := a.db(s.db)
	d.users[s.user] = true
	if ev.severity == "ERROR" || ev.severity == "FATAL" {
		d.Errors++
	}
	if m := durationRE.FindStringSubmatch(msg); m != nil {
		return a.duration(ev, s, d, m)
	}
	if m := statementRE.FindStringSubmatch(msg); m != nil {
		s.lastText, s.hasLastText = m[1], true // log_statement: the text of the next "duration:" line
	}
	return nil
}

// duration takes one "duration:" line.
func (a *logAnalysis) duration(ev logEvent, s *session, d *dbFacts, m []string) error {
	msec, err := strconv.ParseFloat(m[1], 64)
	if err != nil || msec < 0 || msec > 1e12 {
		return nil
	}
	dur := ms(msec)
	kind, text := m[2], m[4]
	switch kind {
	case "parse", "bind":
		d.Extended = true
		if !s.hasPending {
			s.pendStart, s.hasPending = ev.at.Add(-dur), true
		}
		s.pending += dur
		return nil
	}
	rt := roundTrip{end: ev.at, dur: dur, text: text, hasText: kind != ""}
	rt.start = ev.at.Add(-dur)
	if kind == "execute" {
		d.Extended = true
		if s.hasPending {
			rt.start, rt.dur = s.pendStart, s.pending+dur
		}
	}
	s.pending, s.hasPending = 0, false
	if kind == "" && s.hasLastText { // log_duration: the text came on its own line before
		rt.text, rt.hasText = s.lastText, true
	}
	if kind == "fastpath function call" {
		rt.text = "SELECT"
	}
	s.hasLastText = false
	a.trip(s, d, rt)
	return nil
}

// pgbouncerSetRE is one SET PgBouncer sends to give a server its client's
// parameters before the client's query (varcache_apply): several come in
// one query string, each quoted.
var pgbouncerSetRE = regexp.MustCompile(`(?i)^\s*SET\s+(client_encoding|datestyle|timezone|standard_conforming_strings|application_name|intervalstyle)\s*=\s*'(?:[^']|'')*'\s*$`)

// housekeeping reports whether a statement is a pooler's, not the
// application's: PgBouncer's reset, its empty check query and the SETs it
// sends to carry a client's parameters to a server. import's own
// statements (--pg's) are left out too.
func housekeeping(text string) bool {
	if strings.Contains(text, ownTag) {
		return true
	}
	t := strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(text), ";"))
	if t == "" || strings.EqualFold(t, "DISCARD ALL") {
		return true
	}
	parts := strings.Split(t, ";")
	for _, p := range parts {
		if !pgbouncerSetRE.MatchString(p) {
			return false
		}
	}
	return true
}

// trip places one round trip in its session's transactions.
func (a *logAnalysis) trip(s *session, d *dbFacts, rt roundTrip) {
	if strings.Contains(rt.text, ownTag) {
		s.own = true
	}
	if rt.hasText && housekeeping(rt.text) {
		d.Housekeeping++
		return
	}
	in := a.inWindow(rt.end)
	if in {
		d.RoundTrips = append(d.RoundTrips, rt.dur)
	}
	if !rt.hasText {
		d.Textless++
		// Without the text the transaction boundaries are unknown: each
		// round trip is taken as its own transaction.
		s.inBlock = false
	}
	if s.cur == nil {
		s.cur = &openTxn{start: rt.start}
		if !s.lastTxnEnd.IsZero() && in && a.inWindow(s.lastTxnEnd) {
			d.BetweenGaps = append(d.BetweenGaps, rt.start.Sub(s.lastTxnEnd))
		}
	} else {
		s.cur.gaps = append(s.cur.gaps, rt.start.Sub(s.cur.lastEnd))
	}
	s.cur.trips++
	s.cur.lastEnd = rt.end
	if rt.hasText {
		for _, k := range splitKinds(rt.text) {
			switch k {
			case kBegin:
				s.inBlock = true
			case kEnd:
				s.inBlock = false
			}
		}
	}
	if s.inBlock {
		return
	}
	t := s.cur
	s.cur = nil
	s.lastTxnEnd = rt.end
	if a.inWindow(t.start) && in {
		d.Txns++
		d.TxnTrips += t.trips
		d.InTxnGaps = append(d.InTxnGaps, t.gaps...)
		d.TxnHold += rt.end.Sub(t.start)
		s.txns++
	}
}

// finish picks the database and works out the session figures.
func (a *logAnalysis) finish(files []string, format logFormat) (*LogFacts, error) {
	if a.durations == 0 {
		return nil, fmt.Errorf("%w: --csvlog: %s has no statement durations: set log_min_duration_statement = 0 (every statement with its duration) and reload PostgreSQL, then let the application run",
			ErrNoData, strings.Join(files, ", "))
	}
	name := a.opt.Database
	var busiest []string
	for n, d := range a.dbs {
		if len(d.RoundTrips) > 0 {
			busiest = append(busiest, n)
		}
	}
	sort.Slice(busiest, func(i, j int) bool {
		x, y := len(a.dbs[busiest[i]].RoundTrips), len(a.dbs[busiest[j]].RoundTrips)
		return x > y || x == y && busiest[i] < busiest[j]
	})
	if name == "" {
		if len(busiest) == 0 {
			return nil, fmt.Errorf("%w: --csvlog: no round trip of any database ended in the window %s", ErrNoData, a.windowText())
		}
		name = busiest[0]
	}
	d := a.dbs[name]
	if d == nil || len(d.RoundTrips) == 0 {
		return nil, fmt.Errorf("%w: --csvlog: no round trip of database %s ended in the window %s (databases with round trips: %s)",
			ErrNoData, name, a.windowText(), strings.Join(busiest, ", "))
	}
	f := &d.LogFacts
	f.Files, f.Format, f.ZoneKnown, f.Durations, f.Connections = files, format, a.zoneKnown, a.durations, a.conns
	for _, b := range busiest {
		if b != name {
			f.OtherDatabases = append(f.OtherDatabases, b)
		}
	}
	for u := range d.users {
		f.Users = append(f.Users, u)
	}
	sort.Strings(f.Users)
	from, to := a.opt.From, a.opt.To
	f.Windowed = !from.IsZero() || !to.IsZero()
	if from.IsZero() {
		from = a.first
	}
	if to.IsZero() {
		to = a.last
	}
	f.Window = Window{From: from, To: to, Samples: len(f.RoundTrips)}
	span := to.Sub(from)
	var open time.Duration
	for _, id := range a.order {
		s := a.sessions[id]
		if s.db != name || s.own {
			continue
		}
		lo, hi := s.first, s.last
		if !s.opened.IsZero() {
			lo = s.opened
		}
		if !s.closed {
			hi = to
		}
		lo, hi = maxTime(lo, from), minTime(hi, to)
		if hi.After(lo) {
			open += hi.Sub(lo)
			f.Sessions++
		}
		if s.arrivedInWindow {
			f.Arrivals++
		}
		if s.departedInWindow {
			f.Departures++
		}
		if s.arrivedInWindow && s.departedInWindow {
			f.SessionTxns = append(f.SessionTxns, s.txns)
		}
	}
	if span > 0 {
		f.OpenMean = open.Seconds() / span.Seconds()
	}
	if f.Txns == 0 {
		return nil, fmt.Errorf("%w: --csvlog: database %s has round trips but no whole transaction in the window %s", ErrNoData, name, a.windowText())
	}
	return f, nil
}

func (a *logAnalysis) windowText() string {
	if a.opt.From.IsZero() && a.opt.To.IsZero() {
		return "(the whole log)"
	}
	return Window{From: a.opt.From, To: a.opt.To}.String()
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
