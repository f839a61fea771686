package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// proxyLog writes the proxy's log as PgBouncer writes its own, one line per
// message: "2026-12-06 10:00:00.123 UTC [PID] LOG message" (LOG, WARNING
// or ERROR), to stderr unless quiet and appended to logfile when one is
// set. PgBouncer's tools (and its test suite) read these lines. Reopen
// opens the file again after a rotation: logrotate's create (the old file
// renamed) and copytruncate (the file cut to zero; O_APPEND writes at its
// new end) both work.
type proxyLog struct {
	mu     sync.Mutex
	stderr io.Writer // nil: quiet
	path   string
	file   *os.File
	// pending holds the lines written before the first Open (the settings
	// are read, and their notes logged, before the file is known); Open
	// writes them to the file.
	pending [][]byte
	opened  bool
	pid     int
	now     func() time.Time
}

// newProxyLog makes the log; stderr nil is -q.
func newProxyLog(stderr io.Writer) *proxyLog {
	return &proxyLog{stderr: stderr, pid: os.Getpid(), now: time.Now}
}

// Open (re)opens path for appending ("" closes any file: stderr only). On
// error the old file stays in use.
func (l *proxyLog) Open(path string) error {
	var f *os.File
	if path != "" {
		var err error
		f, err = os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o640)
		if err != nil {
			return fmt.Errorf("logfile: %w", err)
		}
	}
	l.mu.Lock()
	old := l.file
	l.path, l.file = path, f
	if !l.opened {
		l.opened = true
		for _, line := range l.pending {
			if f != nil {
				_, _ = f.Write(line)
			}
		}
		l.pending = nil
	}
	l.mu.Unlock()
	if old != nil {
		_ = old.Close()
	}
	return nil
}

// Reopen opens the log file again (SIGHUP), under its path in newPath when
// that differs ("" keeps none).
func (l *proxyLog) Reopen(newPath string) error { return l.Open(newPath) }

// Close closes the log file.
func (l *proxyLog) Close() { _ = l.Open("") }

// Quiet stops the writes to stderr (the daemon's stderr is /dev/null).
func (l *proxyLog) Quiet() {
	l.mu.Lock()
	l.stderr = nil
	l.mu.Unlock()
}

// levels are the message prefixes that set a line's level; the prefix is
// dropped from the line. Anything else is LOG, PgBouncer's info level.
var levels = []struct{ prefix, level string }{
	{"WARNING: ", "WARNING"}, {"warning: ", "WARNING"},
	{"ERROR: ", "ERROR"}, {"error: ", "ERROR"},
	{"FATAL: ", "FATAL"},
}

// Write takes what a log.Logger (no prefix, no flags) writes: one message
// ending in a newline.
func (l *proxyLog) Write(b []byte) (int, error) {
	n := len(b)
	msg := string(bytes.TrimRight(b, "\n"))
	level := "LOG"
	for _, lv := range levels {
		if strings.HasPrefix(msg, lv.prefix) {
			level, msg = lv.level, msg[len(lv.prefix):]
			break
		}
	}
	var line []byte
	line = l.now().UTC().AppendFormat(line, "2006-01-02 15:04:05.000 MST")
	line = append(line, " ["...)
	line = strconv.AppendInt(line, int64(l.pid), 10)
	line = append(line, "] "...)
	line = append(line, level...)
	line = append(line, ' ')
	for i, part := range strings.Split(msg, "\n") {
		if i > 0 {
			line = append(line, "\n\t"...) // a message of several lines stays one entry
		}
		line = append(line, part...)
	}
	line = append(line, '\n')
	l.mu.Lock()
	defer l.mu.Unlock()
	var err error
	if l.stderr != nil {
		_, err = l.stderr.Write(line)
	}
	if !l.opened && len(l.pending) < 1000 {
		l.pending = append(l.pending, line)
	}
	if l.file != nil {
		if _, ferr := l.file.Write(line); ferr != nil {
			err = ferr
		}
	}
	return n, err
}

// pidfile management, as PgBouncer 1.18's main.c.

// checkPidFile refuses to start when path names a running process
// (PgBouncer: "pidfile exists, another instance running?") and removes a
// stale one, saying so in the log.
func checkPidFile(path string, logf func(string, ...any)) error {
	if path == "" {
		return nil
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("pidfile: could not read %s: %w", path, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return fmt.Errorf("pidfile: %s exists, another instance running? (it holds %q, not a pid; remove it if no proxy runs)", path, strings.TrimSpace(string(b)))
	}
	if processAlive(pid) {
		return fmt.Errorf("pidfile: %s exists, another instance running? (process %d is alive)", path, pid)
	}
	logf("stale pidfile, removing")
	if err := os.Remove(path); err != nil {
		return fmt.Errorf("pidfile: could not remove stale pidfile: %w", err)
	}
	return nil
}

// writePidFile writes this process's pid to path (a file that must not
// exist) and returns what removes it at exit.
func writePidFile(path string) (remove func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, fmt.Errorf("pidfile: could not open %s: %w", path, err)
	}
	_, err = fmt.Fprintf(f, "%d\n", os.Getpid())
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(path)
		return nil, fmt.Errorf("pidfile: could not write %s: %w", path, err)
	}
	return func() { _ = os.Remove(path) }, nil
}
