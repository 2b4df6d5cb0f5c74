/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * libparanic_sock.so: the fork handlers (registered by the constructor, sock_config.c).
 * A port belongs to one process: the child sorts the sockets it inherited and forgets
 * the parent's port; the parent shares its cluster UDP sockets (docs/sockets.md, "fork
 * and exec").
 */
#include "sock_int.h"

#include <string.h>
#include <unistd.h>

/* The child of a fork must not use the parent's port (a context belongs to one
 * process): open TCP connections the prepare handler paused are shared (the first user
 * takes them, sock_tcp_fork.c); the other sockets it inherited that only the port served
 * (cluster listeners, connections the fork could not pause) are stale, every call on
 * them fails with EBADF; the ones the OS serves too
 * (a wildcard listener, a UDP socket bound to INADDR_ANY) become the OS's sockets in the
 * child. An inherited UDP socket on the cluster only (bound to the node's address) is
 * shared: the child's first use opens its own port and takes the socket's directory
 * entry over (sk_udp_claim, sock_udp.c). Its new sockets open a port of its own (any free
 * context) on first need. The parent's connections, requests and directory entries stay
 * the parent's: the child forgets them (their memory is left alone). */
void sk_atfork_child(void)
{
	pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
	G.lock = fresh;
	sk_in = 0;
	if (!G.active)
		return;
	for (int fd = 0; fd < SK_MAX_FD; fd++) {
		struct sock *s = G.fds[fd];
		if (!s)
			continue;
		if (s->type == SK_CAND) {
			s->dir = 0;   /* a port it bound is the parent's entry */
		} else if (s->os) {
			G.fds[fd] = NULL;   /* the OS's socket only, in the child */
		} else if (s->type == SK_CONN && s->c && s->c->fs) {
			;   /* shared: paused by the prepare handler, taken by the first user (sock_tcp_fork.c) */
		} else if (s->type != SK_UDP) {
			s->stale = 1;
			s->dir = 0;
		}
	}
	sk_tcp_fork_child();
	sk_udp_fork(1);   /* (G.udps: the inherited UDP sockets on the cluster only) */
	G.port = NULL;
	G.n_ifd = 0;   /* the parent's port's fds: the child may close its copies */
	G.open_failed = 0;
	G.conns = NULL;
	G.listeners = NULL;
	G.dh = G.uh = NULL;
	G.uinflight = 0;
	G.dir_used = 0;
	memset(G.chan_used, 0, sizeof(G.chan_used));
	memset(G.stat, 0, sizeof(G.stat));
	G.next_eport = 32768u + (uint32_t)getpid() % 16384u;
	G.gen = (uint32_t)getpid() * 2654435761u;
}

/* Before fork: the open TCP connections are paused, to be shared (sock_tcp_fork.c). */
void sk_atfork_prepare(void)
{
	if (!G.active || sk_in || !G.port)
		return;
	sk_enter();
	sk_tcp_fork_prepare();
	sk_leave();
}

/* The parent of a fork: its UDP sockets on the cluster are shared with the child. */
void sk_atfork_parent(void)
{
	int locked = !sk_in;
	if (!G.active)
		return;
	if (locked)
		sk_enter();
	sk_udp_fork(0);
	if (locked)
		sk_leave();
}
