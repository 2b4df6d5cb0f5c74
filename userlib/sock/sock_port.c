/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * libparanic_sock.so: the process's socket port. A process of a job opens, on first
 * need, one port on any free context of its node (or PARANIC_SOCK_CTX); the port
 * numbers it binds go into its node's directory (sock_dir.c), which tells connectors
 * the context. At exit (the library's destructor) it tells every peer, lets the sends
 * in flight finish and closes the port.
 */
#include "sock_tcp.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>

/* The process's open fds (below SK_MAX_FD) as a bit set, from /proc/self/fd. */
static uint64_t fds_before[SK_MAX_FD / 64], fds_after[SK_MAX_FD / 64];

static int fd_scan(uint64_t *bits)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	memset(bits, 0, SK_MAX_FD / 8);
	if (!d)
		return -1;
	while ((e = readdir(d))) {
		long fd = strtol(e->d_name, NULL, 10);
		if (e->d_name[0] >= '0' && e->d_name[0] <= '9' && fd >= 0 && fd < SK_MAX_FD && fd != dirfd(d))
			bits[fd / 64] |= 1ull << (fd % 64);
	}
	closedir(d);
	return 0;
}

pn_port_t *sk_port(void)
{
	pn_port_opts_t o;
	const char *b;
	int r, scanned;

	if (G.port)
		return G.port;
	if (!G.active || G.open_failed || G.finished)
		return NULL;
	pn_port_opts_init(&o);
	o.hal.ctx = G.ctx_fixed ? (int)G.ctx : PN_CTX_ANY;
	scanned = fd_scan(fds_before) == 0;
	r = pn_port_open(&G.port, &o);
	if (r < 0) {
		G.port = NULL;
		G.open_failed = 1;
		if (G.ctx_fixed)
			sk_warn("cannot open the port at node %u context %u: %s; using the OS's sockets only", G.node,
				G.ctx, pn_strerror(r));
		else
			sk_warn("cannot open a port at node %u: %s; using the OS's sockets only", G.node,
				pn_strerror(r));
		return NULL;
	}
	G.ctx = (unsigned)pn_port_ctx(G.port);
	/* The fds the port opened (sim: the simulator's socket and the memory; pci: the
	 * device; the daemon's connection) must outlive a program that closes every fd it
	 * does not know (pvmd does when it starts): the program's close of them is ignored. */
	if (scanned && fd_scan(fds_after) == 0) {
		int n = 0;
		for (int w = 0; w < SK_MAX_FD / 64; w++)
			for (uint64_t x = fds_after[w] & ~fds_before[w]; x && n < SK_MAX_IFD; x &= x - 1)
				G.ifd[n++] = w * 64 + __builtin_ctzll(x);
		__atomic_store_n(&G.n_ifd, n, __ATOMIC_RELEASE);
	}
	b = pn_backend_name(pn_port_hal(G.port));
	G.local_pids = b && (!strcmp(b, "sw") || !strcmp(b, "sim"));
	if (G.debug)
		sk_warn("port open at node %d context %d (%s), %d fds of its own", pn_port_node(G.port),
			pn_port_ctx(G.port), b, G.n_ifd);
	return G.port;
}

/* At exit: tell every peer (CLOSE after the data), let the sends in flight finish (at
 * most PARANIC_SOCK_LINGER_MS), close the port. */
static void sk_fini(void)
{
	struct pn_backoff b = {0};
	uint64_t t0;

	/* sk_in still set: this thread left the library by longjmp from a signal handler
	 * (iperf3 does on SIGINT) and holds the lock; another thread may hold it for ever
	 * for the same reason: then give up after a second rather than hang the exit. */
	if (!sk_in) {
		t0 = pn_monotonic_ns();
		while (pthread_mutex_trylock(&G.lock) != 0) {
			if (pn_monotonic_ns() - t0 > 1000000000ull)
				return;
			pn_backoff_step(&b);
		}
		sk_in = 1;
	}
	if (G.active && !G.finished)
		sk_tcp_fork_exit();   /* connections shared over fork: let go (the last holder closes) */
	if (G.dir_used)
		sk_dir_fini();
	if (!G.port) {
		if (G.stats && G.active && !G.finished)
			sk_stats_print("at exit");
		G.finished = 1;
		sk_leave();
		return;
	}
	for (struct conn *c = G.conns; c; c = c->next)
		if (!c->closed && c->state == CS_OPEN && !c->error) {
			sk_conn_send_close(c);
			c->wr_shut = 1;
		}
	t0 = pn_monotonic_ns();
	G.finished = 1;   /* no new port; peers' pids checked every millisecond */
	for (;;) {
		int pending = G.dh != NULL || G.uh != NULL;
		uint64_t now = pn_monotonic_ns();
		sk_service(1);
		for (struct conn *c = G.conns; c; c = c->next) {
			sk_pid_check(c, now);   /* a peer that has exited takes nothing more */
			sk_conn_reap(c);
			if (c->error && c->ph)
				sk_conn_cancel_sends(c);
			pending |= c->ph != NULL;
		}
		if (!pending || pn_monotonic_ns() - t0 >= G.linger_ns)
			break;
		sk_pause(&b);
	}
	G.finished = 1;
	if (G.debug) {
		unsigned open_ = 0, zombies = 0;
		for (struct conn *c = G.conns; c; c = c->next)
			c->closed ? zombies++ : open_++;
		sk_warn("exit: %u connections open, %u closed ones still draining; counters: tcp_opened %llu "
			"tcp_remote %llu udp_sent %llu udp_recv %llu udp_taken %llu", open_, zombies,
			(unsigned long long)G.stat[SK_ST_TCP_OPENED], (unsigned long long)G.stat[SK_ST_TCP_REMOTE],
			(unsigned long long)G.stat[SK_ST_UDP_SENT], (unsigned long long)G.stat[SK_ST_UDP_RECV],
			(unsigned long long)G.stat[SK_ST_UDP_TAKEN]);
	}
	if (G.stats)
		sk_stats_print("at exit");
	__atomic_store_n(&G.n_ifd, 0, __ATOMIC_RELEASE);
	pn_port_close(G.port);
	G.port = NULL;
	sk_leave();
}

__attribute__((destructor)) static void sk_destructor(void)
{
	sk_fini();
}
