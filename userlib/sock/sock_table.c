/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * libparanic_sock.so: the socket table. G.fds maps an fd number to the struct sock the
 * library keeps for it (sock_int.h: sk_peek, sk_get/sk_put); a socket lives while an fd
 * or a call in progress refers to it, and sk_destroy ends its cluster side. A socket
 * that leaves the OS keeps its fd number: an eventfd placeholder takes the OS socket's
 * place (sk_placeholder).
 */
#include "sock_tcp.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

struct sock *sk_new(int type, int family)
{
	struct sock *s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->type = type;
	s->family = family;
	s->sndbuf = 16384;
	s->rcvbuf = 131072;
	return s;
}

struct sock *sk_get(int fd)
{
	struct sock *s;
	if (fd < 0 || fd >= SK_MAX_FD)
		return NULL;
	s = G.fds[fd];
	if (s)
		s->refs++;
	return s;
}

void sk_put(struct sock *s)
{
	if (s && --s->refs == 0)
		sk_destroy(s);
}

void sk_set_fd(int fd, struct sock *s)
{
	struct sock *old;
	if (fd < 0 || fd >= SK_MAX_FD)
		return;
	old = G.fds[fd];
	if (s)
		s->refs++;
	__atomic_store_n(&G.fds[fd], s, __ATOMIC_RELEASE);
	sk_put(old);
}

void sk_untrack(int fd)
{
	sk_set_fd(fd, NULL);
}

/* Put an eventfd in place of the OS socket at fd (same number, same close-on-exec). */
int sk_placeholder(int fd)
{
	int fl = REAL(fcntl)(fd, F_GETFD), e, r;
	if (fl < 0)
		return -errno;
	e = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (e < 0)
		return -errno;
	r = REAL(dup3)(e, fd, (fl & FD_CLOEXEC) ? O_CLOEXEC : 0);
	int err = errno;
	REAL(close)(e);
	return r < 0 ? -err : 0;
}

void sk_destroy(struct sock *s)
{
	if (s->stale) {   /* the parent's: nothing of it is ours */
		free(s);
		return;
	}
	if (s->dir && s->type != SK_UDP)
		sk_dir_del(s->dir, s->lport);
	switch (s->type) {
	case SK_UDP:
		sk_udp_destroy(s);
		break;
	case SK_LISTEN:
		for (struct sock **pp = &G.listeners; *pp; pp = &(*pp)->lnext)
			if (*pp == s) {
				*pp = s->lnext;
				break;
			}
		while (s->qh) {
			struct conn *c = s->qh;
			s->qh = c->qnext;
			sk_conn_close(c);
		}
		break;
	case SK_CONN:
		if (s->c && !sk_tcp_release(s))   /* shared over fork: let go, unless the last */
			sk_conn_close(s->c);
		break;
	}
	free(s);
}
