// Package uring batches socket sends and receives into one system call
// with Linux's io_uring, for the proxy's event loop (package pooler).
//
// On the machines poolsim runs on a system call's entry and exit cost
// about a microsecond of CPU each (a paravirtualised VM with page-table
// isolation), more than the pooler's own work on a message; one batch of
// an event loop's iteration holds a read or a write for each of many
// sockets. A Ring queues them as SEND and RECV operations with
// MSG_DONTWAIT and submits them all with one io_uring_enter: each
// completes during that call (data ready, written, or -EAGAIN: never
// armed for later), so its result is in the completion queue when Submit
// returns and the caller's buffers are not used after it.
//
// Only these two operations on non-blocking sockets are offered. A Ring
// belongs to one goroutine (no locks). New fails, with ErrUnsupported,
// where the kernel has no io_uring or refuses it (kernel.io_uring_disabled,
// Docker's default seccomp profile) or does not run SEND and RECV (before
// Linux 5.6; New asks with IORING_REGISTER_PROBE): callers then use plain
// read and sendto.
package uring
