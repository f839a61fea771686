//go:build unix

package pooler

import "syscall"

// logFDLimit logs, at Serve, the descriptor limit beside what the settings
// may need, in PgBouncer's words (its main.c check_limits): "kernel file
// descriptor limit: N (hard: H); max_client_conn: M, max expected fd use:
// E", E being max_client_conn + 10 and, per [databases] entry, its pool
// size (times the users known from auth_file and [users], unless the entry
// forces a user). PgBouncer logs it as LOG whatever the figures; the proxy
// logs it as a WARNING when E passes the limit, so that the shortfall is
// seen before clients meet it.
func (p *Proxy) logFDLimit(cfg *Config) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		p.logf("ERROR: could not get RLIMIT_NOFILE: %s", strerror(err))
		return
	}
	want := cfg.expectedFDs(*p.secrets.Load())
	level := ""
	if uint64(want) > uint64(rl.Cur) {
		level = "WARNING: "
	}
	p.logf("%skernel file descriptor limit: %d (hard: %d); max_client_conn: %d, max expected fd use: %d",
		level, int64(rl.Cur), int64(rl.Max), cfg.MaxClientConn, want)
}
