/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * libparanic_sock.so: the library's own exports (pn_sock_*), for tests, tools and
 * benchmarks, which find them with dlsym: what the library made of an fd, its counters,
 * and the time base of its port's backend.
 */
#include "sock_int.h"

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

/* For the tests: the library's counters by name (UDP: "udp_sent", "udp_recv",
 * "udp_nobody" (sent to a cluster port nobody has bound: dropped), "udp_unbound"
 * (arrived for a port no socket has any more: dropped), "udp_full" (the receive queue
 * was full: dropped), "udp_failed" (the ports layer failed the send), "udp_taken" (a
 * UDP port shared over fork taken over from another process); TCP: "tcp_opened"
 * (cluster connections opened, by connect or by a listener), "tcp_remote" (those with
 * a peer on another node)); -1 unknown. */
SK_EXPORT long long pn_sock_stat(const char *name)
{
	static const char *const names[SK_ST_N] = {"udp_sent", "udp_recv", "udp_nobody", "udp_unbound", "udp_full",
						   "udp_failed", "udp_taken", "tcp_opened", "tcp_remote"};
	long long v = -1;
	sk_enter();
	for (int i = 0; i < SK_ST_N; i++)
		if (name && !strcmp(name, names[i]))
			v = (long long)G.stat[i];
	sk_leave();
	return v;
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
