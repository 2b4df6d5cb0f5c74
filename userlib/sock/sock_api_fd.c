/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * libparanic_sock.so: the interposed fd calls (sock_api.h): close, dup, dup2, dup3,
 * fcntl, fcntl64, ioctl (FIONBIO, FIONREAD; the SIOCGIF* calls of the pn0 interface: sock_if.c). The socket table follows the OS's fd
 * table; the socket port's own fds (sk_internal_fd) are kept from a program that closes
 * every fd.
 */
#include "sock_api.h"

#include <fcntl.h>
#include <stdarg.h>
#include <sys/ioctl.h>

SK_EXPORT int close(int fd)
{
	if (!sk_in && sk_internal_fd(fd))
		return 0;   /* the socket port's own: kept (sock_int.h) */
	if (sk_peek(fd) || (!sk_in && __atomic_load_n(&G.eps, __ATOMIC_RELAXED))) {
		sk_enter();
		if (G.eps) {
			sk_ep_forget(fd);
			sk_ep_close(fd);
		}
		if (fd >= 0 && fd < SK_MAX_FD && G.fds[fd])
			sk_set_fd(fd, NULL);
		sk_leave();
	}
	return REAL(close)(fd);
}

/* After the OS made newfd a copy of oldfd: the table follows. */
static void dup_follow(int oldfd, int newfd)
{
	struct sock *s;
	if (oldfd == newfd)
		return;
	s = oldfd >= 0 && oldfd < SK_MAX_FD ? G.fds[oldfd] : NULL;
	if (newfd >= 0 && newfd < SK_MAX_FD && G.fds[newfd])
		sk_set_fd(newfd, NULL);   /* dup2 over one of ours: that reference is gone */
	if (!s)
		return;
	if (s->type == SK_CAND) {
		sk_untrack(oldfd);         /* a shared OS socket stays the OS's */
		return;
	}
	if (newfd < SK_MAX_FD)
		sk_set_fd(newfd, s);
}

SK_EXPORT int dup(int fd)
{
	int r;
	if (!sk_peek(fd))
		return REAL(dup)(fd);
	sk_enter();
	r = REAL(dup)(fd);
	if (r >= 0)
		dup_follow(fd, r);
	sk_leave();
	return r;
}

SK_EXPORT int dup2(int oldfd, int newfd)
{
	int r;
	if (!sk_in && oldfd != newfd && sk_internal_fd(newfd)) {
		errno = EBUSY;   /* the socket port's own fd stays */
		return -1;
	}
	if (!sk_peek(oldfd) && !sk_peek(newfd))
		return REAL(dup2)(oldfd, newfd);
	sk_enter();
	r = REAL(dup2)(oldfd, newfd);
	if (r >= 0)
		dup_follow(oldfd, newfd);
	sk_leave();
	return r;
}

SK_EXPORT int dup3(int oldfd, int newfd, int flags)
{
	int r;
	if (!sk_in && oldfd != newfd && sk_internal_fd(newfd)) {
		errno = EBUSY;
		return -1;
	}
	if (!sk_peek(oldfd) && !sk_peek(newfd))
		return REAL(dup3)(oldfd, newfd, flags);
	sk_enter();
	r = REAL(dup3)(oldfd, newfd, flags);
	if (r >= 0)
		dup_follow(oldfd, newfd);
	sk_leave();
	return r;
}

static int do_fcntl(int fd, int cmd, long arg)
{
	struct sock *s = sk_peek(fd);
	int r;
	if (!s)
		return REAL(fcntl)(fd, cmd, arg);
	sk_enter();
	s = sk_get(fd);
	switch (s ? cmd : -1) {
	case F_GETFL:
		r = REAL(fcntl)(fd, cmd);
		if (r >= 0 && paranic(s))
			r = (r & ~O_NONBLOCK) | (s->nonblock ? O_NONBLOCK : 0);
		break;
	case F_SETFL:
		if (paranic(s)) {
			s->nonblock = !!(arg & O_NONBLOCK);
			r = REAL(fcntl)(fd, cmd, arg | O_NONBLOCK);   /* the placeholder never blocks */
		} else {
			r = REAL(fcntl)(fd, cmd, arg);
			if (r == 0)
				s->nonblock = !!(arg & O_NONBLOCK);
		}
		break;
	case F_DUPFD:
	case F_DUPFD_CLOEXEC:
		r = REAL(fcntl)(fd, cmd, arg);
		if (r >= 0)
			dup_follow(fd, r);
		break;
	default:
		r = REAL(fcntl)(fd, cmd, arg);
	}
	sk_put(s);
	sk_leave();
	return r;
}

SK_EXPORT int fcntl(int fd, int cmd, ...)
{
	va_list ap;
	long arg;
	va_start(ap, cmd);
	arg = va_arg(ap, long);
	va_end(ap);
	return do_fcntl(fd, cmd, arg);
}

SK_EXPORT int fcntl64(int fd, int cmd, ...)
{
	va_list ap;
	long arg;
	va_start(ap, cmd);
	arg = va_arg(ap, long);
	va_end(ap);
	return do_fcntl(fd, cmd, arg);
}

SK_EXPORT int ioctl(int fd, unsigned long req, ...)
{
	va_list ap;
	void *arg;
	struct sock *s = sk_peek(fd);
	int r;
	va_start(ap, req);
	arg = va_arg(ap, void *);
	va_end(ap);
	if (__builtin_expect(req >= 0x8910 && req < 0x8970, 0) && !sk_in && sk_if_ioctl(fd, req, arg, &r))
		return r;   /* SIOCGIF*: the pn0 interface (sock_if.c) */
	if (!paranic(s) || (req != FIONBIO && req != FIONREAD))
		return REAL(ioctl)(fd, req, arg);
	sk_enter();
	s = sk_get(fd);
	if (req == FIONREAD)
		sk_use(s);
	if (!paranic(s) || !arg) {
		r = paranic(s) ? -EFAULT : 1;
	} else if (s->stale) {
		r = -EBADF;
	} else if (req == FIONBIO) {
		s->nonblock = *(int *)arg != 0;
		r = 0;
	} else if (s->type == SK_UDP) {   /* as Linux: the size of the next datagram */
		size_t n = sk_udp_next_len(s);
		if (!n && s->os)
			r = 1;
		else
			*(int *)arg = (int)n, r = 0;
	} else {
		size_t n = sk_available(s);
		*(int *)arg = n > INT32_MAX ? INT32_MAX : (int)n;
		r = 0;
	}
	sk_put(s);
	sk_leave();
	return r == 1 ? REAL(ioctl)(fd, req, arg) : fail(r);
}
