//go:build !unix

package pooler

// logFDLimit: no RLIMIT_NOFILE to report here.
func (p *Proxy) logFDLimit(*Config) {}
