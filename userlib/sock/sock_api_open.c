/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * libparanic_sock.so: the interposed calls that make a socket and give it its place
 * (sock_api.h): socket, bind, listen, connect, accept, accept4, and getsockname,
 * getpeername, which report it. Here a watched OS socket joins the cluster (placeholder
 * fd, sk_register, sk_connect, sk_listen) or is left to the OS (sk_untrack).
 */
#include "sock_api.h"

#include <fcntl.h>

SK_EXPORT int socket(int domain, int type, int protocol)
{
	int fd = REAL(socket)(domain, type, protocol);
	struct sock *s;

	if (fd < 0 || sk_in || !G.active || G.finished || fd >= SK_MAX_FD)
		return fd;
	if ((domain != AF_INET && domain != AF_INET6) ||
	    !(((type & 0xf) == SOCK_STREAM && (protocol == 0 || protocol == IPPROTO_TCP)) ||
	      ((type & 0xf) == SOCK_DGRAM && (protocol == 0 || protocol == IPPROTO_UDP))))
		return fd;
	sk_enter();
	if ((s = sk_new(SK_CAND, domain))) {
		s->os = 1;
		s->dgram = (type & 0xf) == SOCK_DGRAM;
		s->nonblock = !!(type & SOCK_NONBLOCK);
		sk_set_fd(fd, s);
	}
	sk_leave();
	return fd;
}

SK_EXPORT int bind(int fd, __CONST_SOCKADDR_ARG addr, socklen_t len)
{
	const struct sockaddr *sa = addr.__sockaddr__;
	struct sock *s = sk_peek(fd);
	uint32_t a;
	uint16_t port;
	int any, node, r;

	if (!s)
		return REAL(bind)(fd, sa, len);
	sk_enter();
	s = sk_get(fd);
	if (!s || s->type != SK_CAND) {
		r = s && s->stale ? -EBADF : -EINVAL;
		sk_put(s);
		sk_leave();
		return s ? fail(r) : REAL(bind)(fd, sa, len);
	}
	if (s->dgram) {
		r = sk_udp_bind(s, fd, sa, len);
		sk_put(s);
		sk_leave();
		return fail(r);
	}
	node = sk_cluster_addr(sa, len, &a, &port, &any);
	if (node == SK_BEYOND) {
		r = -EADDRNOTAVAIL;   /* no node of the job has it */
	} else if (any && !sk_v6only(s)) {
		/* the wildcard: bound by the OS, listening on the cluster too */
		r = REAL(bind)(fd, sa, len);
		if (r == 0) {
			struct sockaddr_storage ss;
			socklen_t sl = sizeof(ss);
			s->bound_any = 1;
			if (REAL(getsockname)(fd, (struct sockaddr *)&ss, &sl) == 0)
				s->lport = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
									  : ((struct sockaddr_in *)&ss)->sin_port);
			/* in the node's directory at once: peers' connects find the port */
			if (sk_register(s, SK_PROTO_TCP, s->lport) == -EADDRINUSE)
				sk_untrack(fd);   /* another process of the node has it on the cluster: the OS's */
		} else {
			r = -errno;
		}
	} else if (node >= 0 && sk_port()) {
		if ((unsigned)node != G.node) {
			r = -EADDRNOTAVAIL;
		} else if (s->lport || s->bound_any) {
			r = -EINVAL;
		} else if (port && sk_listener_for(port, a)) {
			r = -EADDRINUSE;
		} else if ((r = sk_register(s, SK_PROTO_TCP, port)) == 0) {
			int fl = REAL(fcntl)(fd, F_GETFL);
			if ((r = sk_placeholder(fd)) == 0) {
				s->nonblock = fl >= 0 && (fl & O_NONBLOCK);
				s->type = SK_BOUND;
				s->os = 0;
				s->laddr = a;
			} else {
				sk_dir_del(SK_PROTO_TCP, s->lport);
				s->dir = 0;
				s->lport = 0;
			}
		}
	} else {
		sk_untrack(fd);   /* any other address: the OS's socket */
		r = REAL(bind)(fd, sa, len) < 0 ? -errno : 0;
	}
	sk_put(s);
	sk_leave();
	return fail(r);
}

SK_EXPORT int listen(int fd, int backlog)
{
	struct sock *s = sk_peek(fd);
	int r = 0;

	if (!s)
		return REAL(listen)(fd, backlog);
	sk_enter();
	s = sk_get(fd);
	if (!s || s->dgram) {
		sk_put(s);
		sk_leave();
		return REAL(listen)(fd, backlog);   /* UDP: EOPNOTSUPP from the OS */
	}
	switch (s->stale ? -1 : s->type) {
	case -1:
		r = -EBADF;
		break;
	case SK_CAND:
		if (REAL(listen)(fd, backlog) < 0) {
			r = -errno;
			break;
		}
		if (!s->bound_any) {   /* bound by listen() itself to the wildcard, any port */
			struct sockaddr_storage ss;
			socklen_t sl = sizeof(ss);
			if (REAL(getsockname)(fd, (struct sockaddr *)&ss, &sl) == 0)
				s->lport = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
									  : ((struct sockaddr_in *)&ss)->sin_port);
		}
		if (sk_v6only(s) || (!s->dir && sk_register(s, SK_PROTO_TCP, s->lport) < 0) || sk_listen(s) < 0)
			sk_untrack(fd);   /* the OS's listener only */
		break;
	case SK_BOUND:
		r = sk_listen(s);
		break;
	case SK_LISTEN:
		if (s->os && REAL(listen)(fd, backlog) < 0)
			r = -errno;
		break;
	default:
		r = -EINVAL;
	}
	sk_put(s);
	sk_leave();
	return fail(r);
}

SK_EXPORT int connect(int fd, __CONST_SOCKADDR_ARG addr, socklen_t len)
{
	const struct sockaddr *sa = addr.__sockaddr__;
	struct sock *s = sk_peek(fd);
	uint32_t a;
	uint16_t port;
	int any, node, r;

	if (!s) {
		if (__builtin_expect(G.active, 0) && sk_beyond(sa, len))
			return (int)sk_unreachable_ss();   /* beyond the job: never the OS's route */
		return REAL(connect)(fd, sa, len);
	}
	sk_enter();
	s = sk_get(fd);
	if (!s) {
		sk_leave();
		return sk_beyond(sa, len) ? (int)sk_unreachable_ss() : REAL(connect)(fd, sa, len);
	}
	if (s->stale) {
		r = -EBADF;
	} else if (s->dgram) {
		int to_os;
		r = sk_udp_connect(s, fd, sa, len, &to_os);
		if (r == 0 && to_os) {
			if (s->type == SK_CAND)
				sk_untrack(fd);   /* left to the OS */
			r = REAL(connect)(fd, sa, len) < 0 ? -errno : 0;
		}
		sk_put(s);
		sk_leave();
		return fail(r);
	}
	switch (s->stale || s->dgram ? -1 : s->type) {
	case -1:
		break;
	case SK_CONN:
		if (s->c->state == CS_CONNECTING) {
			r = -EALREADY;
		} else if (s->c->state == CS_OPEN) {
			r = -EISCONN;
		} else {
			r = -(s->so_error ? s->so_error : s->c->error);
			s->so_error = 0;
			if (!r)
				r = -ECONNABORTED;
		}
		break;
	case SK_LISTEN:
		r = -EISCONN;
		break;
	case SK_CAND:
	case SK_BOUND:
		node = sk_cluster_addr(sa, len, &a, &port, &any);
		if (node == SK_BEYOND) {
			r = -EHOSTUNREACH;   /* a cluster address beyond the job's nodes: never the OS's */
			G.stat[SK_ST_BEYOND]++;
			break;
		}
		if (node < 0 || !sk_port()) {
			if (s->type == SK_BOUND) {
				r = -ENETUNREACH;   /* a cluster-bound socket reaches the cluster only */
				break;
			}
			if (node >= 0)
				G.stat[SK_ST_OS_CLUSTER]++;   /* no port (said on stderr): the OS's, counted */
			sk_untrack(fd);
			sk_put(s);
			sk_leave();
			return REAL(connect)(fd, sa, len);
		}
		if (!port) {
			r = -ECONNREFUSED;
			break;
		}
		if (s->type == SK_CAND) {
			int fl = REAL(fcntl)(fd, F_GETFL), v;
			socklen_t vl = sizeof(v);
			if (REAL(getsockopt)(fd, SOL_SOCKET, SO_SNDBUF, &v, &vl) == 0)
				s->sndbuf = v;
			vl = sizeof(v);
			if (REAL(getsockopt)(fd, SOL_SOCKET, SO_RCVBUF, &v, &vl) == 0)
				s->rcvbuf = v;
			if ((r = sk_placeholder(fd)) < 0)
				break;
			s->nonblock = fl >= 0 && (fl & O_NONBLOCK);
		}
		if ((r = sk_connect(s, a, port, node)) < 0)
			break;
		if (s->c->state == CS_FAILED) {   /* refused at once (nobody in the directory) */
			r = -(s->c->error ? s->c->error : ECONNREFUSED);
			s->so_error = 0;
			break;
		}
		r = s->nonblock ? -EINPROGRESS : sk_connect_wait(s);
		break;
	default:
		r = -EINVAL;
	}
	sk_put(s);
	sk_leave();
	return fail(r);
}

static int do_accept(int fd, struct sockaddr *sa, socklen_t *len, int flags)
{
	struct sock *s = sk_peek(fd);
	int r;
	if (!s || s->type != SK_LISTEN)
		return REAL(accept4)(fd, sa, len, flags);
	sk_enter();
	s = sk_get(fd);
	if (!s || s->type != SK_LISTEN) {
		sk_put(s);
		sk_leave();
		return REAL(accept4)(fd, sa, len, flags);
	}
	r = s->stale ? -EBADF : sk_accept(s, fd, sa, len, flags);
	sk_put(s);
	sk_leave();
	return fail(r);
}

SK_EXPORT int accept(int fd, __SOCKADDR_ARG addr, socklen_t *__restrict len)
{
	if (!sk_peek(fd))
		return REAL(accept)(fd, addr.__sockaddr__, len);
	return do_accept(fd, addr.__sockaddr__, len, 0);
}

SK_EXPORT int accept4(int fd, __SOCKADDR_ARG addr, socklen_t *__restrict len, int flags)
{
	return do_accept(fd, addr.__sockaddr__, len, flags);
}

/* ---- names ----------------------------------------------------------------------------------- */

static int do_name(int fd, struct sockaddr *sa, socklen_t *len, int peer)
{
	struct sock *s = sk_peek(fd);
	int r = 0;
	if (!paranic(s))
		return peer ? REAL(getpeername)(fd, sa, len) : REAL(getsockname)(fd, sa, len);
	sk_enter();
	s = sk_get(fd);
	if (!paranic(s)) {
		r = 1;
	} else if (!len || !sa) {
		r = -EFAULT;
	} else if (s->stale) {
		r = -EBADF;
	} else if (s->type == SK_UDP && peer) {
		r = sk_udp_peername(s, fd, sa, len);
	} else if (s->type == SK_CONN) {
		if (peer && s->c->state != CS_OPEN)
			r = -ENOTCONN;
		else if (peer)
			sk_fill_addr(s->family, s->c->raddr, s->c->rport, sa, len);
		else
			sk_fill_addr(s->family, s->c->laddr, s->c->lport, sa, len);
	} else if (peer) {
		r = -ENOTCONN;
	} else {
		sk_fill_addr(s->family, s->laddr, s->lport, sa, len);
	}
	sk_put(s);
	sk_leave();
	if (r == 1)
		return peer ? REAL(getpeername)(fd, sa, len) : REAL(getsockname)(fd, sa, len);
	return fail(r);
}

SK_EXPORT int getsockname(int fd, __SOCKADDR_ARG addr, socklen_t *__restrict len)
{
	return do_name(fd, addr.__sockaddr__, len, 0);
}

SK_EXPORT int getpeername(int fd, __SOCKADDR_ARG addr, socklen_t *__restrict len)
{
	return do_name(fd, addr.__sockaddr__, len, 1);
}
