//go:build linux

package childproc

import (
	"bytes"
	"os"
	"strconv"
	"strings"
)

// Children lists the live (not zombie) child processes of ppid with
// their titles (/proc/PID/cmdline, its NULs as spaces: what a process
// that rewrites its title, as PostgreSQL's do, shows in ps).
func Children(ppid int) (map[int]string, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	out := map[int]string{}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // gone meanwhile
		}
		// After the parenthesised command name: state, then ppid.
		s := string(st)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) < 2 || f[0] == "Z" || f[0] == "X" || f[1] != strconv.Itoa(ppid) {
			continue
		}
		cmd, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil {
			continue
		}
		out[pid] = strings.TrimSpace(string(bytes.ReplaceAll(cmd, []byte{0}, []byte{' '})))
	}
	return out, nil
}
