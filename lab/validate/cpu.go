package validate

import (
	"os"
	"strconv"
	"strings"
	"time"
)

// cpuSample is the machine's CPU time counters and this process's CPU time
// at one moment, so a run can report how busy the CPUs were and how much of
// that was the driver and the in-process proxy.
type cpuSample struct {
	at          time.Time
	busy, total float64 // machine-wide clock ticks (all CPUs), /proc/stat
	steal       float64 // ticks the hypervisor gave to other guests
	self        time.Duration
	instr       time.Duration // of self, the instruments' (instruments.go)
	ok          bool
}

func sampleCPU() cpuSample {
	s := cpuSample{at: time.Now(), instr: instrumentCPU(), self: processCPU()}
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return s
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 5 || f[0] != "cpu" {
		return s
	}
	for i, v := range f[1:] {
		x, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return s
		}
		if i >= 8 { // guest and guest_nice are already in user and nice
			break
		}
		s.total += x
		if i != 3 && i != 4 { // idle, iowait
			s.busy += x
		}
		if i == 7 {
			s.steal = x
		}
	}
	s.ok = s.total > 0
	return s
}

// cpuUse is what the CPUs did between two samples: the machine's busy
// fraction of all CPUs, and this process's share of all CPUs.
func cpuUse(a, b cpuSample, cpus int) (machine, self float64) {
	if a.ok && b.ok && b.total > a.total {
		machine = (b.busy - a.busy) / (b.total - a.total)
	}
	if wall := b.at.Sub(a.at); wall > 0 && cpus > 0 {
		self = float64(b.self-a.self) / float64(wall) / float64(cpus)
	}
	return machine, self
}

// stealUse is the fraction of all CPUs the hypervisor gave to other guests
// between two samples (steal time: the cores were not this machine's).
func stealUse(a, b cpuSample) float64 {
	if a.ok && b.ok && b.total > a.total {
		return (b.steal - a.steal) / (b.total - a.total)
	}
	return 0
}
