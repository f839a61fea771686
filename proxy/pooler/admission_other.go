//go:build !unix

package pooler

// fdBudget reads no descriptor limit where there is no RLIMIT_NOFILE:
// 0, no limit.
func fdBudget() (limit int, inUse int) { return 0, 0 }
