/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * libparanic_sock.so: the interposed data calls (sock_api.h): read, write, recv, send,
 * recvfrom, sendto, readv, writev, recvmsg, sendmsg (and glibc's _chk variants), and
 * shutdown. Calls on a TCP socket go to sock_tcp_io.c, on a UDP socket to sock_udp.c; a
 * watched UDP socket that sends to the cluster joins it here (sk_udp_wants).
 */
#include "sock_api.h"

#include <limits.h>
#include <stdlib.h>

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
	sk_use(s);
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
		if (r > 0 && !(flags & MSG_PEEK))
			G.stat[SK_ST_TCP_RX_BYTES] += (uint64_t)r;
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
		if (to && sk_beyond(to, tolen)) {   /* an OS socket: still never to the OS */
			*handled = 1;
			return sk_unreachable_ss();
		}
		*handled = 0;
		return 0;
	}
	*handled = 1;
	sk_use(s);
	if (s->stale) {
		r = -EBADF;
	} else if (s->dgram) {
		struct iovec v = {(void *)buf, n};
		struct msghdr m = {.msg_name = (void *)to, .msg_namelen = tolen, .msg_iov = &v, .msg_iovlen = 1};
		r = sk_udp_sendmsg(s, fd, &m, flags);
	} else {
		r = sk_write(s, buf, n, flags, &sigpipe);   /* a stream: the address is ignored */
		if (r > 0) {
			G.stat[SK_ST_TCP_TX_BYTES] += (uint64_t)r;
			sk_zc_sent(s, flags);
		}
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
	if (__builtin_expect(!sk_peek(fd), 1)) {
		if (__builtin_expect(G.active, 0) && sk_beyond(to.__sockaddr__, tolen))
			return sk_unreachable_ss();   /* beyond the job: never the OS's route */
		return REAL(sendto)(fd, buf, n, flags, to.__sockaddr__, tolen);
	}
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
		if (omsg && sk_beyond(omsg->msg_name, omsg->msg_namelen)) {   /* never to the OS */
			*handled = 1;
			return sk_unreachable_ss();
		}
		*handled = 0;
		return 0;
	}
	*handled = 1;
	sk_use(s);
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
	} else if (!out && msg && (flags & MSG_ERRQUEUE)) {
		r = s->type == SK_CONN ? sk_zc_errqueue(s, msg) : -EAGAIN;   /* MSG_ZEROCOPY completions (copied) */
		msg = NULL;
	} else {
		r = out ? sk_writev(s, iov, cnt, flags, &sigpipe) : sk_readv(s, iov, cnt, flags);
		if (r > 0 && (out || !(flags & MSG_PEEK)))
			G.stat[out ? SK_ST_TCP_TX_BYTES : SK_ST_TCP_RX_BYTES] += (uint64_t)r;
		if (r > 0 && out)
			sk_zc_sent(s, flags);
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
	if (__builtin_expect(!sk_peek(fd), 1)) {
		if (__builtin_expect(G.active, 0) && msg && sk_beyond(msg->msg_name, msg->msg_namelen))
			return sk_unreachable_ss();   /* beyond the job: never the OS's route */
		return REAL(sendmsg)(fd, msg, flags);
	}
	r = do_iov(fd, msg->msg_iov, (int)msg->msg_iovlen, flags, 1, NULL, msg, &h);
	return h ? r : REAL(sendmsg)(fd, msg, flags);
}

SK_EXPORT int shutdown(int fd, int how)
{
	struct sock *s = sk_peek(fd);
	int r;
	if (!paranic(s))
		return REAL(shutdown)(fd, how);
	sk_enter();
	s = sk_get(fd);
	sk_use(s);
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
