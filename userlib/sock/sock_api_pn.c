/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * libparanic_sock.so: the library's own exports (pn_sock_*), for tests, tools and
 * benchmarks, which find them with dlsym: what the library made of an fd, its counters,
 * and the time base of its port's backend.
 */
#include "sock_int.h"

#include <stdio.h>
#include <string.h>

/* For the tests and tools: what the library made of fd. 0 not a socket of ours (the
 * OS's), 1 an OS TCP or UDP socket it watches, 2 bound to the cluster, 3 listening on the
 * cluster, 4 a ParaNIC connection, 5 a UDP socket on the cluster; -1 a socket inherited
 * over fork that only the parent's port served (unusable: EBADF). */
SK_EXPORT int pn_sock_fd_kind(int fd)
{
	struct sock *s;
	int k;
	if (fd < 0 || fd >= SK_MAX_FD)
		return 0;
	sk_enter();
	s = G.fds[fd];
	k = s ? (s->stale ? -1 : s->type) : 0;
	sk_leave();
	return k;
}

#define SK_ST_NAME(e, n) n,
static const char *const st_names[SK_ST_N] = {SK_STATS(SK_ST_NAME)};
#undef SK_ST_NAME

/* For the tests: the library's counters by name (docs/sockets.md, "Counters"); -1
 * unknown. */
SK_EXPORT long long pn_sock_stat(const char *name)
{
	long long v = -1;
	sk_enter();
	for (int i = 0; i < SK_ST_N; i++)
		if (name && !strcmp(name, st_names[i]))
			v = (long long)G.stat[i];
	sk_leave();
	return v;
}

/* PARANIC_SOCK_STATS / PARANIC_SOCK_DEBUG: "paranic_sock[pid]: counters node N: name
 * value ..." on stderr, for unmodified programs whose counters a test reads. */
void sk_stats_print(const char *when)
{
	char line[1024];
	int n = snprintf(line, sizeof(line), "counters %s node %u:", when, G.node);
	for (int i = 0; i < SK_ST_N && n > 0 && (size_t)n < sizeof(line); i++)
		n += snprintf(line + n, sizeof(line) - (size_t)n, " %s %llu", st_names[i], (unsigned long long)G.stat[i]);
	sk_warn("%s", line);
}

/* For benchmarks (pn_sockbench finds it with dlsym): the time base of the socket port's
 * backend, pn_now_ns (wall clock on sw, simulated time on sim), so that a plain socket
 * program can time the hardware path on the simulator; 0 while this process has no
 * port open (before its first cluster socket, or outside a job). */
SK_EXPORT uint64_t pn_sock_now_ns(void)
{
	uint64_t t = 0;
	sk_enter();
	if (G.port)
		t = pn_now_ns(pn_port_hal(G.port));
	sk_leave();
	return t;
}
