//go:build !linux

package validate

// lastCore cannot be read off Linux (no /proc/PID/stat): no sample.
func (s *statFiles) lastCore(pid int) (int, bool) { return 0, false }

// keep has no files to close off Linux.
func (s *statFiles) keep(pids []int) {}
