/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * libparanic_sock.so: the interposed calls. Each looks the fd up in the socket table
 * (a lock-free hint first, so calls on other fds cost one load); what is not a
 * ParaNIC socket goes to libc (dlsym(RTLD_NEXT)).
 *
 * A TCP socket (AF_INET/AF_INET6, SOCK_STREAM) of a job's process is an OS socket
 * until it is bound to this node's cluster address (SK_BOUND), connected to a cluster
 * address (SK_CONN), or listens bound to the wildcard address (SK_LISTEN on the OS
 * and on the cluster at once). Its fd number stays: the OS socket is replaced by an
 * eventfd placeholder (dup3) when it leaves the OS. A UDP socket (SOCK_DGRAM) is watched
 * the same way and handed to sock_udp.c once it binds or sends to the cluster.
 */
#include "sock_int.h"

#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <netinet/tcp.h>
#include <unistd.h>

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

/* The socket is ours to serve (not an OS socket the kernel serves). */
static inline int paranic(const struct sock *s)
{
	return s && s->type != SK_CAND && !(s->type == SK_LISTEN && s->os);
}

/* ---- socket, bind, listen, connect, accept --------------------------------------------------- */

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

static int v6only(const struct sock *s)
{
	for (int i = 0; i < s->nopts; i++)
		if (s->opts[i].level == IPPROTO_IPV6 && s->opts[i].name == IPV6_V6ONLY)
			return s->opts[i].val[0] != 0;
	return 0;
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
	if (any && !v6only(s)) {
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
		if (v6only(s) || (!s->dir && sk_register(s, SK_PROTO_TCP, s->lport) < 0) || sk_listen(s) < 0)
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

	if (!s)
		return REAL(connect)(fd, sa, len);
	sk_enter();
	s = sk_get(fd);
	if (!s) {
		sk_leave();
		return REAL(connect)(fd, sa, len);
	}
	if (s->stale) {
		r = -EBADF;
	} else if (s->dgram) {
		int to_os;
		r = sk_udp_connect(s, fd, sa, len, &to_os);
		if (r == 0 && to_os) {
			if (s->type == SK_CAND)
				sk_untrack(fd);   /* the OS's socket from now on */
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
		if (node < 0 || !sk_port()) {
			if (s->type == SK_BOUND) {
				r = -ENETUNREACH;   /* a cluster-bound socket reaches the cluster only */
				break;
			}
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

/* ---- data ------------------------------------------------------------------------------------ */

static ssize_t do_read(int fd, void *buf, size_t n, int flags, struct sockaddr *from, socklen_t *fromlen,
		       int *handled)
{
	struct sock *s;
	ssize_t r;
	sk_enter();
	s = sk_get(fd);
	if (!paranic(s)) {
		sk_put(s);
		sk_leave();
		*handled = 0;
		return 0;
	}
	*handled = 1;
	if (s->stale) {
		r = -EBADF;
	} else if (s->type == SK_UDP) {
		struct iovec v = {buf, n};
		struct msghdr m = {.msg_name = fromlen ? from : NULL, .msg_namelen = fromlen ? *fromlen : 0,
				   .msg_iov = &v, .msg_iovlen = 1};
		r = sk_udp_recvmsg(s, fd, &m, flags);
		if (r >= 0 && from && fromlen)
			*fromlen = m.msg_namelen;
	} else {
		r = sk_read(s, buf, n, flags);
		if (r >= 0 && from && fromlen && s->type == SK_CONN)
			sk_fill_addr(s->family, s->c->raddr, s->c->rport, from, fromlen);
	}
	sk_put(s);
	sk_leave();
	return fail_ss(r);
}

static ssize_t do_write(int fd, const void *buf, size_t n, int flags, const struct sockaddr *to, socklen_t tolen,
			int *handled)
{
	struct sock *s;
	ssize_t r;
	int sigpipe = 0;
	sk_enter();
	s = sk_get(fd);
	if (!paranic(s) && !(s && sk_udp_wants(s, to, tolen))) {
		sk_put(s);
		sk_leave();
		*handled = 0;
		return 0;
	}
	*handled = 1;
	if (s->stale) {
		r = -EBADF;
	} else if (s->dgram) {
		struct iovec v = {(void *)buf, n};
		struct msghdr m = {.msg_name = (void *)to, .msg_namelen = tolen, .msg_iov = &v, .msg_iovlen = 1};
		r = sk_udp_sendmsg(s, fd, &m, flags);
	} else {
		r = sk_write(s, buf, n, flags, &sigpipe);   /* a stream: the address is ignored */
	}
	sk_put(s);
	sk_leave();
	if (sigpipe)
		raise(SIGPIPE);
	return fail_ss(r);
}

SK_EXPORT ssize_t read(int fd, void *buf, size_t n)
{
	int h;
	ssize_t r;
	if (__builtin_expect(!sk_peek(fd), 1))
		return REAL(read)(fd, buf, n);
	r = do_read(fd, buf, n, 0, NULL, NULL, &h);
	return h ? r : REAL(read)(fd, buf, n);
}

SK_EXPORT ssize_t __read_chk(int fd, void *buf, size_t n, size_t buflen)
{
	if (n > buflen)
		abort();
	return read(fd, buf, n);
}

SK_EXPORT ssize_t write(int fd, const void *buf, size_t n)
{
	int h;
	ssize_t r;
	if (__builtin_expect(!sk_peek(fd), 1))
		return REAL(write)(fd, buf, n);
	r = do_write(fd, buf, n, 0, NULL, 0, &h);
	return h ? r : REAL(write)(fd, buf, n);
}

SK_EXPORT ssize_t recv(int fd, void *buf, size_t n, int flags)
{
	int h;
	ssize_t r;
	if (__builtin_expect(!sk_peek(fd), 1))
		return REAL(recv)(fd, buf, n, flags);
	r = do_read(fd, buf, n, flags, NULL, NULL, &h);
	return h ? r : REAL(recv)(fd, buf, n, flags);
}

SK_EXPORT ssize_t __recv_chk(int fd, void *buf, size_t n, size_t buflen, int flags)
{
	if (n > buflen)
		abort();
	return recv(fd, buf, n, flags);
}

SK_EXPORT ssize_t send(int fd, const void *buf, size_t n, int flags)
{
	int h;
	ssize_t r;
	if (__builtin_expect(!sk_peek(fd), 1))
		return REAL(send)(fd, buf, n, flags);
	r = do_write(fd, buf, n, flags, NULL, 0, &h);
	return h ? r : REAL(send)(fd, buf, n, flags);
}

SK_EXPORT ssize_t recvfrom(int fd, void *__restrict buf, size_t n, int flags, __SOCKADDR_ARG from,
			   socklen_t *__restrict fromlen)
{
	int h;
	ssize_t r;
	if (__builtin_expect(!sk_peek(fd), 1))
		return REAL(recvfrom)(fd, buf, n, flags, from.__sockaddr__, fromlen);
	r = do_read(fd, buf, n, flags, from.__sockaddr__, fromlen, &h);
	return h ? r : REAL(recvfrom)(fd, buf, n, flags, from.__sockaddr__, fromlen);
}

SK_EXPORT ssize_t __recvfrom_chk(int fd, void *__restrict buf, size_t n, size_t buflen, int flags,
				 __SOCKADDR_ARG from, socklen_t *__restrict fromlen)
{
	if (n > buflen)
		abort();
	return recvfrom(fd, buf, n, flags, from, fromlen);
}

SK_EXPORT ssize_t sendto(int fd, const void *buf, size_t n, int flags, __CONST_SOCKADDR_ARG to, socklen_t tolen)
{
	int h;
	ssize_t r;
	if (__builtin_expect(!sk_peek(fd), 1))
		return REAL(sendto)(fd, buf, n, flags, to.__sockaddr__, tolen);
	r = do_write(fd, buf, n, flags, to.__sockaddr__, tolen, &h);
	return h ? r : REAL(sendto)(fd, buf, n, flags, to.__sockaddr__, tolen);
}

static ssize_t do_iov(int fd, const struct iovec *iov, int cnt, int flags, int out, struct msghdr *msg,
		      const struct msghdr *omsg, int *handled)
{
	struct sock *s;
	ssize_t r;
	int sigpipe = 0;
	sk_enter();
	s = sk_get(fd);
	if (!paranic(s) && !(s && omsg && sk_udp_wants(s, omsg->msg_name, omsg->msg_namelen))) {
		sk_put(s);
		sk_leave();
		*handled = 0;
		return 0;
	}
	*handled = 1;
	if (s->stale) {
		r = -EBADF;
	} else if (s->dgram) {
		struct msghdr m = {.msg_iov = (struct iovec *)iov, .msg_iovlen = cnt > 0 ? (size_t)cnt : 0};
		if (cnt < 0 || cnt > IOV_MAX)
			r = -EINVAL;
		else if (out)
			r = sk_udp_sendmsg(s, fd, omsg ? omsg : &m, flags);
		else
			r = sk_udp_recvmsg(s, fd, msg ? msg : &m, flags);
		msg = NULL;
	} else {
		r = out ? sk_writev(s, iov, cnt, flags, &sigpipe) : sk_readv(s, iov, cnt, flags);
	}
	if (msg && !out) {
		if (msg->msg_name && s->type == SK_CONN)
			sk_fill_addr(s->family, s->c->raddr, s->c->rport, msg->msg_name, &msg->msg_namelen);
		else
			msg->msg_namelen = 0;
		msg->msg_controllen = 0;
		msg->msg_flags = 0;
	}
	sk_put(s);
	sk_leave();
	if (sigpipe)
		raise(SIGPIPE);
	return fail_ss(r);
}

SK_EXPORT ssize_t readv(int fd, const struct iovec *iov, int cnt)
{
	int h;
	ssize_t r;
	if (__builtin_expect(!sk_peek(fd), 1))
		return REAL(readv)(fd, iov, cnt);
	r = do_iov(fd, iov, cnt, 0, 0, NULL, NULL, &h);
	return h ? r : REAL(readv)(fd, iov, cnt);
}

SK_EXPORT ssize_t writev(int fd, const struct iovec *iov, int cnt)
{
	int h;
	ssize_t r;
	if (__builtin_expect(!sk_peek(fd), 1))
		return REAL(writev)(fd, iov, cnt);
	r = do_iov(fd, iov, cnt, 0, 1, NULL, NULL, &h);
	return h ? r : REAL(writev)(fd, iov, cnt);
}

SK_EXPORT ssize_t recvmsg(int fd, struct msghdr *msg, int flags)
{
	int h;
	ssize_t r;
	if (__builtin_expect(!sk_peek(fd), 1))
		return REAL(recvmsg)(fd, msg, flags);
	r = do_iov(fd, msg->msg_iov, (int)msg->msg_iovlen, flags, 0, msg, NULL, &h);
	return h ? r : REAL(recvmsg)(fd, msg, flags);
}

SK_EXPORT ssize_t sendmsg(int fd, const struct msghdr *msg, int flags)
{
	int h;
	ssize_t r;
	if (__builtin_expect(!sk_peek(fd), 1))
		return REAL(sendmsg)(fd, msg, flags);
	r = do_iov(fd, msg->msg_iov, (int)msg->msg_iovlen, flags, 1, NULL, msg, &h);
	return h ? r : REAL(sendmsg)(fd, msg, flags);
}

/* ---- close, shutdown, names, options ----------------------------------------------------------- */

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

SK_EXPORT int shutdown(int fd, int how)
{
	struct sock *s = sk_peek(fd);
	int r;
	if (!paranic(s))
		return REAL(shutdown)(fd, how);
	sk_enter();
	s = sk_get(fd);
	if (!paranic(s))
		r = -ENOTCONN;
	else if (s->stale)
		r = -EBADF;
	else if (s->type == SK_UDP)
		r = s->os ? (REAL(shutdown)(fd, how) < 0 ? -errno : 0) : s->peer_set ? 0 : -ENOTCONN;
	else
		r = sk_shutdown(s, how);
	sk_put(s);
	sk_leave();
	return fail(r);
}

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

static struct sk_opt *opt_find(struct sock *s, int level, int name)
{
	for (int i = 0; i < s->nopts; i++)
		if (s->opts[i].level == level && s->opts[i].name == name)
			return &s->opts[i];
	return NULL;
}

/* Options of a ParaNIC socket are accepted and remembered (TCP_NODELAY, buffer sizes,
 * keepalive ...: nothing to do over ports); SO_SNDBUF/SO_RCVBUF report what was set. */
int sk_setsockopt(struct sock *s, int level, int name, const void *val, socklen_t len)
{
	struct sk_opt *o;
	if (!val || len > sizeof(o->val))
		return len > sizeof(o->val) ? 0 : -EFAULT;
	if (level == SOL_SOCKET && (name == SO_SNDBUF || name == SO_RCVBUF) && len >= sizeof(int)) {
		int v = *(const int *)val;
		v = v < 1152 ? 2304 : v > (1 << 29) ? (1 << 30) : 2 * v;   /* as Linux: doubled */
		if (name == SO_SNDBUF)
			s->sndbuf = v;
		else
			s->rcvbuf = v;
		return 0;
	}
	if (!(o = opt_find(s, level, name))) {
		if (s->nopts == SK_MAX_OPTS)
			return 0;
		o = &s->opts[s->nopts++];
		o->level = level;
		o->name = name;
	}
	o->len = len;
	memcpy(o->val, val, len);
	return 0;
}

static int put_int(void *val, socklen_t *len, int v)
{
	socklen_t n = *len < sizeof(int) ? *len : sizeof(int);
	memcpy(val, &v, n);
	*len = n;
	return 0;
}

int sk_getsockopt(struct sock *s, int level, int name, void *val, socklen_t *len)
{
	struct sk_opt *o;
	if (!val || !len)
		return -EFAULT;
	if (level == SOL_SOCKET) {
		switch (name) {
		case SO_ERROR: {
			int e = s->so_error;
			s->so_error = 0;
			if (!e && s->type == SK_CONN && s->c->state == CS_FAILED)
				e = s->c->error;
			return put_int(val, len, e);
		}
		case SO_TYPE:
			return put_int(val, len, s->dgram ? SOCK_DGRAM : SOCK_STREAM);
		case SO_DOMAIN:
			return put_int(val, len, s->family);
		case SO_PROTOCOL:
			return put_int(val, len, s->dgram ? IPPROTO_UDP : IPPROTO_TCP);
		case SO_ACCEPTCONN:
			return put_int(val, len, s->type == SK_LISTEN);
		case SO_SNDBUF:
			return put_int(val, len, s->sndbuf);
		case SO_RCVBUF:
			return put_int(val, len, s->rcvbuf);
		}
	}
	if (level == IPPROTO_TCP) {
		switch (name) {
		case TCP_MAXSEG:
			if (!opt_find(s, level, name))
				return put_int(val, len,
					       G.port ? pn_mtu(pn_port_hal(G.port)) : (int)PN_PORT_DEFAULT_EAGER_MAX);
			break;
		case TCP_INFO: {
			struct tcp_info ti;
			socklen_t n = *len < sizeof(ti) ? *len : (socklen_t)sizeof(ti);
			memset(&ti, 0, sizeof(ti));
			ti.tcpi_state = s->type == SK_LISTEN ? TCP_LISTEN
				      : s->type == SK_CONN && s->c->state == CS_OPEN ? TCP_ESTABLISHED : TCP_CLOSE;
			ti.tcpi_snd_mss = ti.tcpi_rcv_mss = G.port ? (uint32_t)pn_mtu(pn_port_hal(G.port)) : 0;
			memcpy(val, &ti, n);
			*len = n;
			return 0;
		}
		case TCP_CONGESTION: {
			static const char name_[] = "paranic";
			socklen_t n = *len < sizeof(name_) ? *len : (socklen_t)sizeof(name_);
			if (!opt_find(s, level, name)) {
				memcpy(val, name_, n);
				*len = n;
				return 0;
			}
			break;
		}
		}
	}
	if ((o = opt_find(s, level, name))) {
		socklen_t n = *len < o->len ? *len : o->len;
		memcpy(val, o->val, n);
		*len = n;
		return 0;
	}
	if (level == SOL_SOCKET || level == IPPROTO_TCP || level == IPPROTO_IP || level == IPPROTO_IPV6)
		return put_int(val, len, 0);   /* never set: off */
	return -ENOPROTOOPT;
}

SK_EXPORT int getsockopt(int fd, int level, int name, void *__restrict val, socklen_t *__restrict len)
{
	struct sock *s = sk_peek(fd);
	int r;
	if (!paranic(s))
		return REAL(getsockopt)(fd, level, name, val, len);
	sk_enter();
	s = sk_get(fd);
	r = !paranic(s) || s->os ? 1 : s->stale ? -EBADF : sk_getsockopt(s, level, name, val, len);
	sk_put(s);
	sk_leave();
	return r == 1 ? REAL(getsockopt)(fd, level, name, val, len) : fail(r);
}

SK_EXPORT int setsockopt(int fd, int level, int name, const void *val, socklen_t len)
{
	struct sock *s = sk_peek(fd);
	int r;
	if (!s)
		return REAL(setsockopt)(fd, level, name, val, len);
	sk_enter();
	s = sk_get(fd);
	if (!s) {
		r = 1;
	} else if (s->stale) {
		r = -EBADF;
	} else if (paranic(s) && !s->os) {
		r = sk_setsockopt(s, level, name, val, len);
	} else {   /* an OS socket: the OS's, and remembered for when it moves to the cluster */
		r = REAL(setsockopt)(fd, level, name, val, len) < 0 ? -errno : 0;
		if (r == 0)
			sk_setsockopt(s, level, name, val, len);
	}
	sk_put(s);
	sk_leave();
	return r == 1 ? REAL(setsockopt)(fd, level, name, val, len) : fail(r);
}

/* ---- fds: dup, fcntl, ioctl ------------------------------------------------------------------ */

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
	if (!paranic(s) || (req != FIONBIO && req != FIONREAD))
		return REAL(ioctl)(fd, req, arg);
	sk_enter();
	s = sk_get(fd);
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
