// wake-pingpong: how long does an idle core take to wake for a thread
// woken from another core, and how does it grow with how long the core
// has idled? Two processes pinned to cores A and B pass one byte back
// and forth over a socket pair; each spins WORK µs before it answers.
// With both on one core a hand-off is a context switch; on two, every
// hand-off wakes the other core, idle since its last answer.
//
// Usage: wake-pingpong A B ROUNDS WORK_US
// Prints the mean round trip and the time per hand-off beyond the work,
// (round trip - 2 * WORK) / 2: on one core a context switch, on two the
// other core's wake-up (and the socket's few µs). On two cores it also
// prints how long each core idles per round trip, round trip - WORK.
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_us(void) {
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static void pin(int core) {
	cpu_set_t s;
	CPU_ZERO(&s);
	CPU_SET(core, &s);
	if (sched_setaffinity(0, sizeof s, &s) != 0) {
		perror("sched_setaffinity");
		exit(1);
	}
}

static void spin(double us) {
	double t = now_us();
	while (now_us() - t < us) {
	}
}

static void xfer(int fd, int out, char *x) {
	if ((out ? write(fd, x, 1) : read(fd, x, 1)) != 1) {
		perror("socket");
		exit(1);
	}
}

int main(int argc, char **argv) {
	if (argc != 5) {
		fprintf(stderr, "usage: %s CORE_A CORE_B ROUNDS WORK_US\n", argv[0]);
		return 2;
	}
	int a = atoi(argv[1]), b = atoi(argv[2]), n = atoi(argv[3]);
	double work = atof(argv[4]);
	const int warm = 1000;
	if (n <= warm) {
		fprintf(stderr, "ROUNDS must be above %d\n", warm);
		return 2;
	}
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) {
		perror("socketpair");
		return 1;
	}
	char x = 0;
	pid_t child = fork();
	if (child == 0) {
		pin(b);
		for (int i = 0; i < n; i++) {
			xfer(sv[1], 0, &x);
			spin(work);
			xfer(sv[1], 1, &x);
		}
		_exit(0);
	}
	pin(a);
	for (int i = 0; i < warm; i++) {
		xfer(sv[0], 1, &x);
		xfer(sv[0], 0, &x);
	}
	double t = now_us();
	for (int i = 0; i < n - warm; i++) {
		spin(work);
		xfer(sv[0], 1, &x);
		xfer(sv[0], 0, &x);
	}
	double rt = (now_us() - t) / (n - warm);
	waitpid(child, NULL, 0);
	printf("cores %d,%d  work %5.0f us  round trip %7.2f us  per hand-off beyond the work %6.2f us", a, b, work, rt,
	       (rt - 2 * work) / 2);
	if (a != b)
		printf("  idle per core %7.2f us", rt - work);
	printf("\n");
	return 0;
}
