/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * libparanic_sock.so: getsockopt and setsockopt (sock_api.h). A ParaNIC socket's options
 * are remembered per socket (what the library itself reads of them: SO_REUSEADDR,
 * SO_REUSEPORT, IPV6_V6ONLY); a watched OS socket's go to the OS and are remembered too,
 * for when it moves to the cluster.
 */
#include "sock_api.h"

#include <netinet/tcp.h>
#include <string.h>

static struct sk_opt *opt_find(struct sock *s, int level, int name)
{
	for (int i = 0; i < s->nopts; i++)
		if (s->opts[i].level == level && s->opts[i].name == name)
			return &s->opts[i];
	return NULL;
}

/* Options of a ParaNIC socket are accepted and remembered (TCP_NODELAY, buffer sizes,
 * keepalive ...: nothing to do over ports); SO_SNDBUF/SO_RCVBUF report what was set. */
static int sk_setsockopt(struct sock *s, int level, int name, const void *val, socklen_t len)
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

static int sk_getsockopt(struct sock *s, int level, int name, void *val, socklen_t *len)
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
