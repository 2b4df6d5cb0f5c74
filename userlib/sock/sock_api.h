/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * libparanic_sock.so: what the interposed calls share (sock_api_open.c, sock_api_io.c,
 * sock_api_opts.c, sock_api_fd.c). Each call looks the fd up in the socket table (a
 * lock-free hint first, so calls on other fds cost one load); what is not a ParaNIC
 * socket goes to libc (dlsym(RTLD_NEXT)).
 *
 * A TCP socket (AF_INET/AF_INET6, SOCK_STREAM) of a job's process is an OS socket
 * until it is bound to this node's cluster address (SK_BOUND), connected to a cluster
 * address (SK_CONN), or listens bound to the wildcard address (SK_LISTEN on the OS
 * and on the cluster at once). Its fd number stays: the OS socket is replaced by an
 * eventfd placeholder (dup3) when it leaves the OS. A UDP socket (SOCK_DGRAM) is watched
 * the same way and handed to sock_udp.c once it binds or sends to the cluster.
 */
#ifndef PN_SOCK_API_H
#define PN_SOCK_API_H

#include "sock_int.h"

/* A call's result: r >= 0 as it is, -errno as -1 with errno set. */
static inline int fail(int r)
{
	if (r < 0) {
		errno = -r;
		return -1;
	}
	return r;
}

static inline ssize_t fail_ss(ssize_t r)
{
	if (r < 0) {
		errno = (int)-r;
		return -1;
	}
	return r;
}

/* A connect or send to a cluster address beyond the job (sk_beyond): counted, and
 * EHOSTUNREACH (callable without the lock). */
static inline ssize_t sk_unreachable_ss(void)
{
	__atomic_fetch_add(&G.stat[SK_ST_BEYOND], 1, __ATOMIC_RELAXED);
	errno = EHOSTUNREACH;
	return -1;
}

/* A use of s (data, shutdown, FIONREAD, poll): a connection shared over fork is taken
 * over by this process, or is another's (stale: EBADF). */
static inline void sk_use(struct sock *s)
{
	if (s && s->type == SK_CONN && s->c && s->c->fs)
		sk_tcp_claim(s);
}

/* The socket is ours to serve (not an OS socket the kernel serves). */
static inline int paranic(const struct sock *s)
{
	return s && s->type != SK_CAND && !(s->type == SK_LISTEN && s->os);
}

#endif /* PN_SOCK_API_H */
