/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * libparanic_sock.so: epoll over sets that mix ParaNIC sockets with anything else.
 *
 * The kernel's epoll instance stays the program's; the library keeps, per instance, the
 * entries of the sockets it tracks (struct sk_ep). Any other fd goes to the kernel as it
 * is. A tracked socket the kernel also serves (an OS socket the library watches, a
 * wildcard listener, a UDP socket bound to INADDR_ANY) is registered with the kernel
 * too, under a marker in place of the program's data (EP_MARK << 32 | fd), which
 * epoll_wait translates back. A ParaNIC-only socket (placeholder fd) is not in the
 * kernel's set: its readiness comes from the library (sk_readiness), as for poll.
 *
 * epoll_wait over a set without ParaNIC-only sockets is the kernel's (markers
 * translated). Otherwise it loops as poll does: the library's readiness, the kernel's
 * with a zero timeout; it spins, yields, then waits in ppoll on the epoll fd 50 us at a
 * time. Level-triggered by default; EPOLLET reports a ParaNIC socket when a readiness
 * bit appears that was not there at the last look; EPOLLONESHOT disables the entry
 * after one report until EPOLL_CTL_MOD. epoll_pwait's signal mask is not applied while
 * ParaNIC sockets are waited on.
 */
#include "sock_int.h"

#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define EP_MARK 0x504e534bull    /* "PNSK" in the upper half of the kernel's data */
#define SPIN_STEPS 20000u
#define OS_WAIT_NS 50000

struct sk_epi {
	int fd;
	uint32_t events;
	epoll_data_t data;
	uint8_t in_os;      /* registered with the kernel (under the marker) */
	uint8_t disabled;   /* EPOLLONESHOT fired */
	uint32_t last;      /* readiness at the last look (EPOLLET) */
};

struct sk_ep {
	struct sk_ep *next;
	int epfd;
	int n, cap;
	struct sk_epi *v;
};

static struct sk_ep *ep_find(int epfd)
{
	for (struct sk_ep *e = G.eps; e; e = e->next)
		if (e->epfd == epfd)
			return e;
	return NULL;
}

static struct sk_epi *epi_find(struct sk_ep *e, int fd)
{
	for (int i = 0; e && i < e->n; i++)
		if (e->v[i].fd == fd)
			return &e->v[i];
	return NULL;
}

static void epi_del(struct sk_ep *e, struct sk_epi *it)
{
	*it = e->v[--e->n];
}

void sk_ep_forget(int fd)
{
	for (struct sk_ep *e = G.eps; e; e = e->next) {
		struct sk_epi *it = epi_find(e, fd);
		if (it)
			epi_del(e, it);
	}
}

void sk_ep_close(int epfd)
{
	for (struct sk_ep **pp = &G.eps; *pp; pp = &(*pp)->next)
		if ((*pp)->epfd == epfd) {
			struct sk_ep *e = *pp;
			*pp = e->next;
			free(e->v);
			free(e);
			return;
		}
}

SK_EXPORT int epoll_create(int size)
{
	int r = REAL(epoll_create)(size);
	if (r >= 0 && !sk_in && __atomic_load_n(&G.eps, __ATOMIC_RELAXED)) {
		sk_enter();
		sk_ep_close(r);   /* an entry list of an earlier instance of this number */
		sk_leave();
	}
	return r;
}

SK_EXPORT int epoll_create1(int flags)
{
	int r = REAL(epoll_create1)(flags);
	if (r >= 0 && !sk_in && __atomic_load_n(&G.eps, __ATOMIC_RELAXED)) {
		sk_enter();
		sk_ep_close(r);
		sk_leave();
	}
	return r;
}

static int os_side(const struct sock *s)
{
	return s->type == SK_CAND || s->os;
}

SK_EXPORT int epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev)
{
	struct sock *s = sk_peek(fd);
	struct sk_ep *e;
	struct sk_epi *it;
	struct epoll_event kev;
	int r = 0;

	if (sk_in || (!s && !__atomic_load_n(&G.eps, __ATOMIC_RELAXED)))
		return REAL(epoll_ctl)(epfd, op, fd, ev);
	sk_enter();
	s = fd >= 0 && fd < SK_MAX_FD ? G.fds[fd] : NULL;
	e = ep_find(epfd);
	it = epi_find(e, fd);
	if (!it && (!s || op != EPOLL_CTL_ADD)) {   /* not one of ours: the kernel's */
		sk_leave();
		return REAL(epoll_ctl)(epfd, op, fd, ev);
	}
	if (op != EPOLL_CTL_DEL && !ev) {
		r = -EFAULT;
		goto out;
	}
	kev.events = ev ? ev->events : 0;
	kev.data.u64 = EP_MARK << 32 | (uint32_t)fd;
	switch (op) {
	case EPOLL_CTL_ADD:
		if (it) {
			r = -EEXIST;
			break;
		}
		if (fd == epfd) {
			r = -EINVAL;
			break;
		}
		if (!e) {
			if (!(e = calloc(1, sizeof(*e)))) {
				r = -ENOMEM;
				break;
			}
			e->epfd = epfd;
			e->next = G.eps;
			__atomic_store_n(&G.eps, e, __ATOMIC_RELEASE);
		}
		if (e->n == e->cap) {
			int cap = e->cap ? 2 * e->cap : 16;
			struct sk_epi *v = realloc(e->v, (size_t)cap * sizeof(*v));
			if (!v) {
				r = -ENOMEM;
				break;
			}
			e->v = v;
			e->cap = cap;
		}
		it = &e->v[e->n];
		memset(it, 0, sizeof(*it));
		if (os_side(s)) {
			if (REAL(epoll_ctl)(epfd, op, fd, &kev) < 0) {
				r = -errno;
				break;
			}
			it->in_os = 1;
		} else if (REAL(fcntl)(epfd, F_GETFD) < 0) {
			r = -EBADF;
			break;
		}
		it->fd = fd;
		it->events = ev->events;
		it->data = ev->data;
		e->n++;
		break;
	case EPOLL_CTL_MOD:
		if (it->in_os && REAL(epoll_ctl)(epfd, op, fd, &kev) < 0 && errno != ENOENT && errno != EBADF) {
			r = -errno;
			break;
		}
		it->events = ev->events;
		it->data = ev->data;
		it->disabled = 0;
		it->last = 0;
		break;
	case EPOLL_CTL_DEL:
		if (it->in_os)
			REAL(epoll_ctl)(epfd, op, fd, &kev);   /* gone already when the fd left the OS */
		epi_del(e, it);
		break;
	default:
		r = -EINVAL;
	}
out:
	sk_leave();
	if (r < 0) {
		errno = -r;
		return -1;
	}
	return 0;
}

/* The kernel's events, markers translated (under the lock). Entries the kernel reports
 * for sockets the library serves too are merged into rev[] (their index) and left out. */
static int translate(struct sk_ep *e, struct epoll_event *ev, int n, uint32_t *rev)
{
	int m = 0;
	for (int i = 0; i < n; i++) {
		if ((ev[i].data.u64 >> 32) == EP_MARK) {
			int fd = (int)(uint32_t)ev[i].data.u64;
			struct sk_epi *it = epi_find(e, fd);
			struct sock *s = fd >= 0 && fd < SK_MAX_FD ? G.fds[fd] : NULL;
			if (!it || it->disabled)
				continue;
			if (rev && s && s->type != SK_CAND && !s->stale) {
				rev[it - e->v] |= ev[i].events;
				continue;
			}
			if (it->events & EPOLLONESHOT)
				it->disabled = 1;
			ev[m].events = ev[i].events;
			ev[m].data = it->data;
			m++;
			continue;
		}
		ev[m++] = ev[i];
	}
	return m;
}

static int ep_wait_ns(int epfd, struct epoll_event *out, int max, int64_t timeout_ns, const sigset_t *mask)
{
	uint64_t t0 = pn_monotonic_ns();
	struct pn_backoff b = {0};
	struct sk_ep *e;
	uint32_t *rev = NULL;
	int ours = 0, listener = 0, result = 0, cap = 0;

	if (max <= 0 || max > (int)(INT32_MAX / sizeof(*out))) {
		errno = EINVAL;
		return -1;
	}
	sk_enter();
	e = ep_find(epfd);
	for (int i = 0; e && i < e->n; i++) {
		struct sock *s = G.fds[e->v[i].fd];
		ours |= s && s->type != SK_CAND;
		listener |= s && s->type == SK_LISTEN;
	}
	if (!ours) {   /* only the kernel's sockets: its wait, markers translated */
		sk_leave();
		for (;;) {
			int n, tmo = timeout_ns < 0 ? -1 : (int)((timeout_ns + 999999) / 1000000);
			int64_t left = timeout_ns < 0 ? -1 : timeout_ns - (int64_t)(pn_monotonic_ns() - t0);
			if (timeout_ns >= 0)
				tmo = left <= 0 ? 0 : (int)((left + 999999) / 1000000);
			n = REAL(epoll_pwait)(epfd, out, max, tmo, mask);
			if (n <= 0 || !e)
				return n;
			sk_enter();
			e = ep_find(epfd);
			n = e ? translate(e, out, n, NULL) : n;
			sk_leave();
			if (n || (timeout_ns >= 0 && left <= 0))
				return n;
		}
	}
	sk_leave();
	for (;;) {
		int n, m = 0;
		uint64_t now;

		sk_enter();
		e = ep_find(epfd);
		if (!e) {
			sk_leave();
			errno = EBADF;
			result = -1;
			break;
		}
		if (cap < e->n) {
			uint32_t *v = realloc(rev, (size_t)e->n * sizeof(*v));
			if (!v) {
				sk_leave();
				errno = ENOMEM;
				result = -1;
				break;
			}
			rev = v;
			cap = e->n;
		}
		memset(rev, 0, (size_t)e->n * sizeof(*rev));
		sk_service(b.n == 0 || listener);
		n = REAL(epoll_wait)(epfd, out, max, 0);
		if (n < 0) {
			sk_leave();
			result = -1;
			break;
		}
		n = translate(e, out, n, rev);
		for (int i = 0; i < e->n; i++) {
			struct sk_epi *it = &e->v[i];
			struct sock *s = G.fds[it->fd];
			uint32_t r = 0, prev = it->last;
			if (!s || s->type == SK_CAND || it->disabled)
				continue;
			r = (uint16_t)sk_readiness(s, (short)(it->events & (EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLPRI |
									     EPOLLRDNORM | EPOLLWRNORM)));
			r &= it->events | EPOLLERR | EPOLLHUP;
			if (it->events & EPOLLET) {   /* only a bit that was not there at the last look */
				it->last = r;
				if (!(r & ~prev))
					r = 0;
			}
			r |= rev[i];
			if (!r)
				continue;
			if (n + m >= max) {   /* no room: next time */
				it->last = prev;
				continue;
			}
			if (it->events & EPOLLONESHOT)
				it->disabled = 1;
			out[n + m].events = r;
			out[n + m].data = it->data;
			m++;
		}
		sk_leave();
		result = n + m;
		now = pn_monotonic_ns();
		if (result || (timeout_ns >= 0 && now - t0 >= (uint64_t)timeout_ns))
			break;
		if (b.n >= SPIN_STEPS) {   /* idle: wait in the kernel for the OS side, briefly */
			int64_t left = timeout_ns < 0 ? OS_WAIT_NS : timeout_ns - (int64_t)(now - t0);
			struct pollfd p = {.fd = epfd, .events = POLLIN};
			struct timespec ts = {0, left < OS_WAIT_NS ? left : OS_WAIT_NS};
			REAL(ppoll)(&p, 1, &ts, NULL);
			b.n++;
		} else {
			pn_backoff_step(&b);
		}
	}
	free(rev);
	return result;
}

SK_EXPORT int epoll_wait(int epfd, struct epoll_event *ev, int max, int timeout)
{
	if (sk_in || !__atomic_load_n(&G.eps, __ATOMIC_RELAXED))
		return REAL(epoll_wait)(epfd, ev, max, timeout);
	return ep_wait_ns(epfd, ev, max, timeout < 0 ? -1 : (int64_t)timeout * 1000000, NULL);
}

SK_EXPORT int epoll_pwait(int epfd, struct epoll_event *ev, int max, int timeout, const sigset_t *mask)
{
	if (sk_in || !__atomic_load_n(&G.eps, __ATOMIC_RELAXED))
		return REAL(epoll_pwait)(epfd, ev, max, timeout, mask);
	return ep_wait_ns(epfd, ev, max, timeout < 0 ? -1 : (int64_t)timeout * 1000000, mask);
}
