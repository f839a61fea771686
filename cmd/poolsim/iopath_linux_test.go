//go:build linux

package main

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/jackc/pgx/v5"

	"github.com/poolsim/poolsim/lab/pgcluster"
	"github.com/poolsim/poolsim/lab/pgcluster/pgclustertest"
)

// A child process of this test binary started with
// POOLSIM_TEST_DENY_IO_URING=1 refuses itself io_uring_setup (EPERM), as
// Docker's default seccomp profile does, before anything else runs.
func init() {
	if os.Getenv("POOLSIM_TEST_DENY_IO_URING") != "1" {
		return
	}
	if err := denyIOUring(); err != nil {
		fmt.Fprintf(os.Stderr, "deny io_uring: %v\n", err)
		os.Exit(3)
	}
}

// denyIOUring installs, on every thread of the process, a seccomp filter
// that fails io_uring_setup with EPERM and allows everything else.
func denyIOUring() error {
	nrSeccomp, arch := 0, uint32(0)
	switch runtime.GOARCH {
	case "amd64":
		nrSeccomp, arch = 317, 0xc000003e // AUDIT_ARCH_X86_64
	case "arm64":
		nrSeccomp, arch = 277, 0xc00000b7 // AUDIT_ARCH_AARCH64
	default:
		return fmt.Errorf("no seccomp numbers for %s", runtime.GOARCH)
	}
	const (
		ioUringSetup  = 425
		retAllow      = 0x7fff0000 // SECCOMP_RET_ALLOW
		retErrno      = 0x00050000 // SECCOMP_RET_ERRNO
		setModeFilter = 1          // SECCOMP_SET_MODE_FILTER
		flagTSync     = 1          // SECCOMP_FILTER_FLAG_TSYNC
		setNoNewPrivs = 38         // PR_SET_NO_NEW_PRIVS
	)
	stmt := func(code, k int) syscall.SockFilter { return syscall.SockFilter{Code: uint16(code), K: uint32(k)} }
	jump := func(code, k, jt, jf int) syscall.SockFilter {
		return syscall.SockFilter{Code: uint16(code), Jt: uint8(jt), Jf: uint8(jf), K: uint32(k)}
	}
	filter := []syscall.SockFilter{
		stmt(syscall.BPF_LD|syscall.BPF_W|syscall.BPF_ABS, 4), // seccomp_data.arch
		jump(syscall.BPF_JMP|syscall.BPF_JEQ|syscall.BPF_K, int(arch), 0, 3),
		stmt(syscall.BPF_LD|syscall.BPF_W|syscall.BPF_ABS, 0), // seccomp_data.nr
		jump(syscall.BPF_JMP|syscall.BPF_JEQ|syscall.BPF_K, ioUringSetup, 0, 1),
		stmt(syscall.BPF_RET|syscall.BPF_K, retErrno|int(syscall.EPERM)),
		stmt(syscall.BPF_RET|syscall.BPF_K, retAllow),
	}
	prog := syscall.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, setNoNewPrivs, 1, 0); e != 0 {
		return fmt.Errorf("prctl(PR_SET_NO_NEW_PRIVS): %w", e)
	}
	if _, _, e := syscall.RawSyscall(uintptr(nrSeccomp), setModeFilter, flagTSync, uintptr(unsafe.Pointer(&prog))); e != 0 {
		return fmt.Errorf("seccomp(SET_MODE_FILTER, TSYNC): %w", e)
	}
	runtime.KeepAlive(filter)
	return nil
}

// TestProxyWithoutIOUring runs `poolsim proxy` where io_uring_setup is
// refused, as in a default Docker container: the proxy says at start that
// it takes the epoll path with a read or sendto per socket, and why, and
// serves queries on it.
func TestProxyWithoutIOUring(t *testing.T) {
	if runtime.GOARCH != "amd64" && runtime.GOARCH != "arm64" {
		t.Skipf("no seccomp numbers for %s", runtime.GOARCH)
	}
	pg := pgclustertest.Start(t, pgcluster.Options{MaxConnections: 20})
	t.Setenv("POOLSIM_TEST_DENY_IO_URING", "1")
	pp := startProxyProcess(t, "--upstream", pg.UserDSN(), "--mode", "transaction", "--pool-size", "2")
	pp.waitOutput(t, "event loop: epoll; one read or sendto system call per socket (io_uring is not available: io_uring_setup: operation not permitted)", 10*time.Second)
	if strings.Contains(pp.out.String(), "batched into one io_uring_enter") {
		t.Errorf("the proxy claims io_uring batching under a filter that refuses it:\n%s", pp.out.String())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dsn := fmt.Sprintf("postgres://poolsim:poolsim@127.0.0.1:%d/poolsim?sslmode=disable", pp.port)
	for c := 0; c < 3; c++ {
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 5; i++ {
			var got int
			want := 10*c + i
			if err := conn.QueryRow(ctx, "select $1::int + 1", pgx.QueryExecModeSimpleProtocol, want).Scan(&got); err != nil || got != want+1 {
				t.Errorf("client %d query %d: %d, %v; want %d", c, i, got, err, want+1)
			}
		}
		conn.Close(ctx)
	}
}
