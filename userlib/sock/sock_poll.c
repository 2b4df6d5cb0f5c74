/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * libparanic_sock.so: poll, ppoll, select, pselect over sets that mix ParaNIC sockets
 * with anything else.
 *
 * A call whose set holds no ParaNIC socket goes to libc unchanged. Otherwise the
 * library loops: ParaNIC sockets' readiness from the port (no interrupt exists to
 * wait on; receive is polled), the other fds by the real poll with a zero timeout; it
 * spins, then yields, then waits in the real ppoll with a short timeout (or sleeps when
 * there are no other fds), so an OS fd wakes it at once and a ParaNIC socket within
 * about 50 us when idle. A listening socket bound to the wildcard address is both: its
 * OS side is polled by the kernel, its cluster side by the library. Signal masks of
 * ppoll/pselect are not applied while ParaNIC sockets are waited on.
 */
#include "sock_int.h"

#include <stdlib.h>
#include <string.h>

#define SPIN_STEPS 20000u          /* pn_backoff's spin and yield phases */
#define OS_WAIT_NS 50000           /* then the real ppoll waits this long per round */
#define LONG_IDLE_NS 100000000ull  /* after this much waiting, rounds of 200 us */

static int is_ours(int fd)
{
	struct sock *s = sk_peek(fd);
	return s && s->type != SK_CAND;
}

int sk_poll_ns(struct pollfd *fds, nfds_t n, int64_t timeout_ns)
{
	struct pollfd osb[32], *os = n <= 32 ? osb : malloc(n * sizeof(*os));
	short ob[32], *ours = n <= 32 ? ob : malloc(n * sizeof(*ours));
	uint8_t kb[32], *kind = n <= 32 ? kb : malloc(n);   /* 0: OS only, 1: ours only, 2: both */
	uint64_t t0 = pn_monotonic_ns();
	struct pn_backoff b = {0};
	int has_os = 0, has_listener = 0, result = 0;

	if (!os || !ours || !kind) {
		result = -1;
		errno = ENOMEM;
		goto out;
	}
	for (nfds_t i = 0; i < n; i++) {
		struct sock *s = sk_peek(fds[i].fd);
		os[i] = fds[i];
		os[i].revents = 0;
		kind[i] = !s || s->type == SK_CAND ? 0 : s->os ? 2 : 1;
		has_listener |= s && s->type == SK_LISTEN;
		if (kind[i] == 1)
			os[i].fd = -1;   /* the placeholder: nothing for the kernel to say */
		else if (fds[i].fd >= 0)
			has_os = 1;
	}
	for (;;) {
		int ready = 0, osr = 0;
		uint64_t now;

		sk_enter();
		sk_service(b.n == 0 || has_listener);   /* a listener waits for connection requests */
		for (nfds_t i = 0; i < n; i++) {
			struct sock *s;
			ours[i] = 0;
			if (!kind[i])
				continue;
			s = G.fds[fds[i].fd];
			if (!s || s->type == SK_CAND) {   /* closed meanwhile: the kernel's business */
				kind[i] = 0;
				os[i].fd = fds[i].fd;
				has_os = 1;
				continue;
			}
			ours[i] = sk_readiness(s, fds[i].events);
			ready += ours[i] != 0;
		}
		sk_leave();
		now = pn_monotonic_ns();
		if (has_os) {
			int64_t left = timeout_ns < 0 ? INT64_MAX : timeout_ns - (int64_t)(now - t0);
			struct timespec ts = {0, 0};
			if (!ready && b.n >= SPIN_STEPS && left > 0) {
				int64_t w = now - t0 > LONG_IDLE_NS ? 4 * OS_WAIT_NS : OS_WAIT_NS;
				ts.tv_nsec = left < w ? left : w;
			}
			osr = REAL(ppoll)(os, n, &ts, NULL);
			if (osr < 0) {
				result = -1;
				goto out;
			}
		}
		result = 0;
		for (nfds_t i = 0; i < n; i++) {
			fds[i].revents = (short)(ours[i] | (kind[i] != 1 ? os[i].revents : 0));
			result += fds[i].revents != 0;
		}
		if (result || (timeout_ns >= 0 && now - t0 >= (uint64_t)timeout_ns))
			goto out;
		if (has_os && b.n >= SPIN_STEPS) {
			b.n++;   /* the ppoll waited */
		} else {
			pn_backoff_step(&b);
			if (b.n > SPIN_STEPS && now - t0 > LONG_IDLE_NS) {
				struct timespec ts = {0, 180000};
				nanosleep(&ts, NULL);
			}
		}
	}
out:
	if (os != osb)
		free(os);
	if (ours != ob)
		free(ours);
	if (kind != kb)
		free(kind);
	return result;
}

static int any_ours(const struct pollfd *fds, nfds_t n)
{
	if (sk_in)
		return 0;
	for (nfds_t i = 0; i < n; i++)
		if (is_ours(fds[i].fd))
			return 1;
	return 0;
}

/* glibc declares poll's array write-only (access attribute); we read the events. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
SK_EXPORT int poll(struct pollfd *fds, nfds_t n, int timeout)
{
	if (__builtin_expect(!any_ours(fds, n), 1))
		return REAL(poll)(fds, n, timeout);
	return sk_poll_ns(fds, n, timeout < 0 ? -1 : (int64_t)timeout * 1000000);
}

SK_EXPORT int __poll_chk(struct pollfd *fds, nfds_t n, int timeout, size_t fdslen)
{
	if (fdslen / sizeof(*fds) < n)
		abort();
	return poll(fds, n, timeout);
}

SK_EXPORT int ppoll(struct pollfd *fds, nfds_t n, const struct timespec *ts, const sigset_t *mask)
{
	if (__builtin_expect(!any_ours(fds, n), 1))
		return REAL(ppoll)(fds, n, ts, mask);
	return sk_poll_ns(fds, n, ts ? (int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec : -1);
}
#pragma GCC diagnostic pop

/* select and pselect through sk_poll_ns: readable = POLLIN|POLLHUP|POLLERR, writable =
 * POLLOUT|POLLERR, exceptional = POLLPRI (as the kernel maps them). */
static int select_ns(int nfds, fd_set *rd, fd_set *wr, fd_set *ex, int64_t timeout_ns, int *handled)
{
	struct pollfd pb[64], *p = pb;
	int m = 0, r, count = 0;

	*handled = 0;
	if (sk_in || nfds <= 0)
		return 0;
	if (nfds > FD_SETSIZE)
		nfds = FD_SETSIZE;
	for (int fd = 0; fd < nfds; fd++)
		if (((rd && FD_ISSET(fd, rd)) || (wr && FD_ISSET(fd, wr)) || (ex && FD_ISSET(fd, ex))) && is_ours(fd)) {
			*handled = 1;
			break;
		}
	if (!*handled)
		return 0;
	if (nfds > 64 && !(p = malloc((size_t)nfds * sizeof(*p)))) {
		errno = ENOMEM;
		return -1;
	}
	for (int fd = 0; fd < nfds; fd++) {
		short ev = 0;
		if (rd && FD_ISSET(fd, rd))
			ev |= POLLIN;
		if (wr && FD_ISSET(fd, wr))
			ev |= POLLOUT;
		if (ex && FD_ISSET(fd, ex))
			ev |= POLLPRI;
		if (ev)
			p[m++] = (struct pollfd){.fd = fd, .events = ev};
	}
	r = sk_poll_ns(p, (nfds_t)m, timeout_ns);
	if (r >= 0) {
		for (int i = 0; i < m; i++)
			if (p[i].revents & POLLNVAL) {
				errno = EBADF;
				r = -1;
			}
	}
	if (r >= 0) {
		if (rd)
			FD_ZERO(rd);
		if (wr)
			FD_ZERO(wr);
		if (ex)
			FD_ZERO(ex);
		for (int i = 0; i < m; i++) {
			short v = p[i].revents;
			if ((p[i].events & POLLIN) && (v & (POLLIN | POLLHUP | POLLERR))) {
				FD_SET(p[i].fd, rd);
				count++;
			}
			if ((p[i].events & POLLOUT) && (v & (POLLOUT | POLLERR))) {
				FD_SET(p[i].fd, wr);
				count++;
			}
			if ((p[i].events & POLLPRI) && (v & POLLPRI)) {
				FD_SET(p[i].fd, ex);
				count++;
			}
		}
		r = count;
	}
	if (p != pb)
		free(p);
	return r;
}

SK_EXPORT int select(int nfds, fd_set *__restrict rd, fd_set *__restrict wr, fd_set *__restrict ex,
		     struct timeval *__restrict tv)
{
	int h, r;
	uint64_t t0 = pn_monotonic_ns();
	int64_t tns = tv ? (int64_t)tv->tv_sec * 1000000000 + (int64_t)tv->tv_usec * 1000 : -1;
	r = select_ns(nfds, rd, wr, ex, tns, &h);
	if (!h)
		return REAL(select)(nfds, rd, wr, ex, tv);
	if (tv && r >= 0) {   /* as Linux: the time not slept */
		int64_t left = tns - (int64_t)(pn_monotonic_ns() - t0);
		if (left < 0)
			left = 0;
		tv->tv_sec = left / 1000000000;
		tv->tv_usec = (left % 1000000000) / 1000;
	}
	return r;
}

SK_EXPORT int pselect(int nfds, fd_set *__restrict rd, fd_set *__restrict wr, fd_set *__restrict ex,
		      const struct timespec *__restrict ts, const sigset_t *__restrict mask)
{
	int h, r;
	r = select_ns(nfds, rd, wr, ex, ts ? (int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec : -1, &h);
	if (!h)
		return REAL(pselect)(nfds, rd, wr, ex, ts, mask);
	return r;
}
