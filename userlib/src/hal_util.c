/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Helpers shared by the HAL's common code, the backends, the ports layer, the socket
 * library and paranicd (declared in hal_backend.h): the monotonic clock, whether a
 * process lives, polite polling.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "hal_backend.h"

uint64_t pn_monotonic_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int pn_pid_alive(uint32_t pid)
{
	char path[64], buf[256];
	FILE *f;
	char *p;

	if (!pid || pid > INT_MAX)
		return 0;
	if (kill((pid_t)pid, 0) < 0 && errno == ESRCH)
		return 0;
	snprintf(path, sizeof(path), "/proc/%u/stat", pid);
	f = fopen(path, "re");
	if (!f)
		return errno != ENOENT;   /* gone between the two looks, or /proc unreadable */
	p = fgets(buf, sizeof(buf), f);
	fclose(f);
	return !(p && (p = strrchr(buf, ')')) && p[1] == ' ' && (p[2] == 'Z' || p[2] == 'X'));
}

void pn_backoff_step(struct pn_backoff *b)
{
	uint32_t n = b->n++;
	if (n < 256) {
		pn_cpu_relax();
	} else if (n < 20000) {
		sched_yield();
	} else {
		struct timespec ts = {0, 20000};
		nanosleep(&ts, NULL);
	}
}
