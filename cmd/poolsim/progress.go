package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// progress reports long work on stderr: in a terminal one line redrawn in
// place once the work has run a second, elsewhere (a log, a pipe) a plain
// line every few seconds once it has run two. Nothing goes to stdout. It is
// written here rather than taken from a library: what it draws is a few
// lines, and the terminal test is os.File's own mode bits.
type progress struct {
	w         io.Writer
	what      string
	terminal  bool
	off       bool
	start     time.Time
	last      time.Time
	drawn     bool
	lastPhase string
}

// Plain lines come at most this often.
const progressEvery = 5 * time.Second

func newProgress(w io.Writer, what string, quiet bool) *progress {
	p := &progress{w: w, what: what, off: quiet, start: time.Now()}
	if f, ok := w.(*os.File); ok {
		p.terminal = isTerminal(f)
	}
	return p
}

func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// update reports done of total units.
func (p *progress) update(done, total int) {
	if p.off || total == 0 {
		return
	}
	now := time.Now()
	el := now.Sub(p.start)
	if p.terminal {
		if el < time.Second || done == total {
			return
		}
		p.drawn = true
		fmt.Fprint(p.w, "\r"+progressLine(p.what, done, total, el)+"\033[K")
		return
	}
	if el < 2*time.Second || now.Sub(p.last) < progressEvery {
		return
	}
	p.last = now
	fmt.Fprintln(p.w, "poolsim: "+progressLine(p.what, done, total, el))
}

// phase reports work in phases (validate): the phase's name and how much
// of the whole is done. A new phase always gets a line (when output is
// not a terminal) and redraws the terminal's.
func (p *progress) phase(name string, done, total int) {
	if p.off {
		return
	}
	el := time.Since(p.start)
	line := fmt.Sprintf("%s: %s", p.what, name)
	if total > 0 {
		line += fmt.Sprintf(" (%d/%d", done, total)
		if done > 0 {
			left := time.Duration(float64(el) * float64(total-done) / float64(done)).Round(time.Second)
			line += fmt.Sprintf(", about %v left", left)
		}
		line += ")"
	}
	if p.terminal {
		p.drawn = true
		fmt.Fprint(p.w, "\r"+line+"\033[K")
		return
	}
	if name == p.lastPhase && time.Since(p.last) < progressEvery {
		return
	}
	p.lastPhase, p.last = name, time.Now()
	fmt.Fprintln(p.w, "poolsim: "+line)
}

// finish clears a drawn line.
func (p *progress) finish() {
	if p.drawn {
		fmt.Fprint(p.w, "\r\033[K")
	}
}

// progressLine is "[=====>     ]  45%  450/1000 runs  3s left".
func progressLine(what string, done, total int, elapsed time.Duration) string {
	const width = 30
	n := done * width / total
	bar := strings.Repeat("=", n)
	if n < width {
		bar += ">" + strings.Repeat(" ", width-n-1)
	}
	left := time.Duration(float64(elapsed) * float64(total-done) / float64(max(done, 1))).Round(time.Second)
	return fmt.Sprintf("%s [%s] %3d%%  %d/%d runs  %v left", what, bar, done*100/total, done, total, left)
}
