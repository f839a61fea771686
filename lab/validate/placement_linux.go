//go:build linux

package validate

import (
	"slices"
	"strconv"

	"golang.org/x/sys/unix"
)

// lastCore is the core process pid last ran on, read through its open
// file.
func (s *statFiles) lastCore(pid int) (int, bool) {
	if s.fds == nil {
		s.fds = map[int]int{}
	}
	fd, ok := s.fds[pid]
	if !ok {
		var err error
		if fd, err = unix.Open("/proc/"+strconv.Itoa(pid)+"/stat", unix.O_RDONLY|unix.O_CLOEXEC, 0); err != nil {
			return 0, false
		}
		s.fds[pid] = fd
	}
	n, err := unix.Pread(fd, s.buf[:], 0)
	if err != nil || n <= 0 {
		unix.Close(fd)
		delete(s.fds, pid)
		return 0, false
	}
	return parseLastCore(string(s.buf[:n]))
}

// keep closes the files of the processes not in pids.
func (s *statFiles) keep(pids []int) {
	for pid, fd := range s.fds {
		if !slices.Contains(pids, pid) {
			unix.Close(fd)
			delete(s.fds, pid)
		}
	}
}
