/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * libparanic_sock.so: UDP over ports.
 *
 * A UDP socket (AF_INET/AF_INET6, SOCK_DGRAM) of a job's process starts as an OS socket
 * the library watches (SK_CAND). It joins the cluster (SK_UDP) when it
 *   - binds to its node's cluster address: cluster only (placeholder fd);
 *   - binds to the wildcard address: the OS socket stays and serves every other
 *     network, the same port number is in the node's directory for the cluster;
 *   - sends to, or connects to, a cluster address while unbound or OS-bound to the
 *     wildcard: bound as above (the kernel picks the port number when none was).
 * A datagram to a cluster address is one ports message (DGRAM, sock_wire.h) to the
 * process the target node's directory names for (UDP, port), sent from a copy and
 * never waited for; with nobody there it is dropped and counted, as UDP would lose it.
 * The library takes arriving datagrams in whenever it runs (sk_udp_pull from
 * sk_service, polls and receives) into the socket's receive queue (at most
 * PARANIC_SOCK_RCVBUF bytes; beyond, dropped and counted); a datagram for a port
 * no socket of the process has any more is dropped and counted too.
 *
 * fork: a UDP socket on the cluster only is shared by the parent and the child, as a
 * kernel socket is, but a port (and its receive queue) belongs to one process. The node's
 * directory entry decides which process the datagrams to the socket's port reach: the
 * child's first use of the inherited socket (any call, poll included) opens its own port
 * and takes the entry over; afterwards either process takes it (back) when it sends or
 * receives on the socket (sk_udp_claim). The entry remembers the owner it was taken
 * from, who gets it back when the taker closes the socket or exits.
 */
#include "sock_int.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The socket a datagram from (addr, sport) to port goes to: one connected to that
 * source first, else an unconnected one (the latest bound), as Linux picks among
 * sockets sharing a port (SO_REUSEADDR). */
static struct sock *udp_find(uint16_t port, uint32_t addr, uint16_t sport)
{
	struct sock *any = NULL, *other = NULL;
	for (struct sock *s = G.udps; s; s = s->unext) {
		if (s->lport != port)
			continue;
		if (!s->peer_set) {
			if (!any)
				any = s;
		} else if (s->peer_node >= 0 && s->paddr == addr && s->pport == sport) {
			return s;
		} else if (!other) {
			other = s;
		}
	}
	return any ? any : other;
}

static uint16_t os_port(int fd)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	if (REAL(getsockname)(fd, (struct sockaddr *)&ss, &sl) < 0)
		return 0;
	return ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
					      : ((struct sockaddr_in *)&ss)->sin_port);
}

static void udp_join(struct sock *s, int os, uint32_t laddr)
{
	s->type = SK_UDP;
	s->os = os;
	s->laddr = laddr;
	s->peer_node = -1;
	s->unext = G.udps;
	G.udps = s;
}

/* An SK_CAND socket joins the cluster with its OS socket kept, bound to the wildcard
 * (by the kernel's choice of port when it was not bound yet). */
static int udp_autobind(struct sock *s, int fd)
{
	uint16_t port = os_port(fd);
	int r;
	if (!sk_port())
		return -ENETUNREACH;
	if (!port) {
		struct sockaddr_in in = {.sin_family = AF_INET};
		struct sockaddr_in6 in6 = {.sin6_family = AF_INET6};
		if ((s->family == AF_INET6 ? REAL(bind)(fd, (struct sockaddr *)&in6, sizeof(in6))
					   : REAL(bind)(fd, (struct sockaddr *)&in, sizeof(in))) < 0)
			return -errno;
		if (!(port = os_port(fd)))
			return -EADDRNOTAVAIL;
	}
	if ((r = sk_register(s, SK_PROTO_UDP, port)) < 0)
		return r;
	udp_join(s, 1, 0);
	return 0;
}

int sk_udp_bind(struct sock *s, int fd, const struct sockaddr *sa, socklen_t len)
{
	uint32_t a;
	uint16_t port;
	int any, node = sk_cluster_addr(sa, len, &a, &port, &any), r;

	if (s->type != SK_CAND)
		return -EINVAL;
	if (node == SK_BEYOND)
		return -EADDRNOTAVAIL;
	if (any && !sk_v6only(s)) {
		if (REAL(bind)(fd, sa, len) < 0) {
			/* On sw and sim every node's process shares one host's ports: a port the
			 * OS has given to another node's process is still free on this node's
			 * cluster address. The socket is then on the cluster only. */
			if (errno != EADDRINUSE || !port || !sk_port() || !G.local_pids)
				return -EADDRINUSE;
			if ((r = sk_register(s, SK_PROTO_UDP, port)) < 0)
				return r;
			if ((r = sk_placeholder(fd)) < 0) {
				sk_dir_del(SK_PROTO_UDP, port);
				s->dir = 0;
				return r;
			}
			udp_join(s, 0, 0);
			return 0;
		}
		if ((r = sk_register(s, SK_PROTO_UDP, os_port(fd))) < 0) {
			sk_untrack(fd);   /* left to the OS */
			return r == -EADDRINUSE ? r : 0;
		}
		udp_join(s, 1, 0);
		return 0;
	}
	if (node < 0) {
		sk_untrack(fd);
		return REAL(bind)(fd, sa, len) < 0 ? -errno : 0;
	}
	if (!sk_port())
		return -EADDRNOTAVAIL;
	if ((unsigned)node != G.node)
		return -EADDRNOTAVAIL;
	{
		int fl = REAL(fcntl)(fd, F_GETFL);
		if ((r = sk_register(s, SK_PROTO_UDP, port)) < 0)
			return r;
		if ((r = sk_placeholder(fd)) < 0) {
			sk_dir_del(SK_PROTO_UDP, s->lport);
			s->dir = 0;
			return r;
		}
		s->nonblock = fl >= 0 && (fl & O_NONBLOCK);
	}
	udp_join(s, 0, a);
	return 0;
}

/* Does a send to `to` (or a connect) make this OS socket a cluster one? */
int sk_udp_wants(struct sock *s, const struct sockaddr *to, socklen_t tolen)
{
	uint32_t a;
	uint16_t p;
	int any;
	return s->dgram && s->type == SK_CAND && !s->stale && to &&
	       (sk_cluster_addr(to, tolen, &a, &p, &any) >= 0 || sk_beyond(to, tolen));
}

int sk_udp_connect(struct sock *s, int fd, const struct sockaddr *sa, socklen_t len, int *to_os)
{
	uint32_t a;
	uint16_t port;
	int any, node, r;

	*to_os = 0;
	if (sa && len >= sizeof(sa_family_t) && sa->sa_family == AF_UNSPEC) {   /* dissolve */
		s->peer_set = 0;
		s->peer_node = -1;
		*to_os = s->os;
		return 0;
	}
	node = sk_cluster_addr(sa, len, &a, &port, &any);
	if (node == SK_BEYOND) {
		G.stat[SK_ST_BEYOND]++;
		return -EHOSTUNREACH;
	}
	if (node < 0) {
		if (s->type == SK_CAND || s->os) {   /* the OS's peer; cluster datagrams are not from it */
			s->peer_set = s->type == SK_UDP;
			s->peer_node = -1;
			*to_os = 1;
			return 0;
		}
		return -ENETUNREACH;
	}
	if (!port)
		return -ECONNREFUSED;
	if (s->type == SK_CAND && (r = udp_autobind(s, fd)) < 0)
		return r;
	if ((r = sk_udp_claim(s, 1)) < 0)
		return r;
	s->peer_set = 1;
	s->peer_node = node;
	s->paddr = a;
	s->pport = port;
	return 0;
}

/* ---- sharing over fork ---------------------------------------------------------------------- */

/* After fork. Parent (child 0): its UDP sockets on the cluster only are shared with the
 * child. Child: they are its too, still to be adopted (its own port, the directory entry);
 * its copy of their queues is the parent's and forgotten; wildcard sockets (the OS's in
 * the child, sock_fork.c) leave the list. */
void sk_udp_fork(int child)
{
	struct sock *s = G.udps, *next;
	if (!child) {
		for (; s; s = s->unext)
			if (!s->os && s->dir)
				s->shared = 1;
		return;
	}
	G.udps = NULL;
	for (; s; s = next) {
		next = s->unext;
		if (s->os)
			continue;
		s->adopt = 1;
		s->shared = 1;
		s->dir = 0;   /* the parent's entry until the child takes it */
		s->qh_d = s->qt_d = NULL;
		s->qbytes = 0;
		s->unext = G.udps;
		G.udps = s;
	}
}

/* Make this process the one the datagrams to s's port reach, if s is shared with
 * another process (above). use: a send, receive or connect; otherwise (poll, FIONREAD)
 * only a forked child's first touch of the inherited socket. 0 or -errno. */
int sk_udp_claim(struct sock *s, int use)
{
	int r;
	if (s->adopt) {
		if (!sk_port())
			return -EBADF;   /* no port of its own: the socket is unusable here */
		s->adopt = 0;
		s->dir = SK_PROTO_UDP;
		G.dir_used = 1;
	} else if (!use || !s->shared || !s->dir) {
		return 0;
	}
	r = sk_dir_claim(SK_PROTO_UDP, s->lport, G.ctx, &s->dslot);
	if (r == 1) {
		G.stat[SK_ST_UDP_TAKEN]++;
		if (G.debug)
			sk_warn("UDP port %u taken over (context %u): shared with another process since a fork", s->lport,
				G.ctx);
	}
	return r < 0 ? r : 0;
}

/* ---- send ---------------------------------------------------------------------------------- */

void sk_udp_reap(void)
{
	for (struct psend **pp = &G.uh; *pp;) {
		struct psend *ps = *pp;
		int r = pn_port_test(G.port, &ps->req, NULL);
		if (r == 0) {
			pp = &ps->next;
			continue;
		}
		if (r < 0)
			G.stat[SK_ST_UDP_FAILED]++;
		*pp = ps->next;
		G.uinflight -= ps->len;
		free(ps->own);
		free(ps);
	}
}

static ssize_t udp_send_cluster(struct sock *s, unsigned node, uint16_t dport, const struct msghdr *msg, size_t len,
				int nb)
{
	struct pn_backoff b = {0};
	struct psend *ps;
	unsigned ctx;
	uint8_t *copy;
	size_t off = 0;

	if (len > SK_UDP_MAX)
		return -EMSGSIZE;
	while (G.uinflight + len > G.sndbuf && G.uh) {   /* the send buffer is full */
		sk_service(1);
		if (G.uinflight + len <= G.sndbuf || !G.uh)
			break;
		if (nb)
			return -EAGAIN;
		sk_pause(&b);
		if (!G.port)
			return -EPIPE;
	}
	if (sk_dir_lookup(node, SK_PROTO_UDP, dport, &ctx, NULL) < 0) {
		G.stat[SK_ST_UDP_NOBODY]++;   /* nobody bound there: lost, as UDP would lose it */
		return (ssize_t)len;
	}
	if (!(copy = malloc(len ? len : 1)) || !(ps = malloc(sizeof(*ps)))) {
		free(copy);
		return -ENOBUFS;
	}
	for (size_t i = 0; i < msg->msg_iovlen; i++) {
		if (msg->msg_iov[i].iov_len)
			memcpy(copy + off, msg->msg_iov[i].iov_base, msg->msg_iov[i].iov_len);
		off += msg->msg_iov[i].iov_len;
	}
	if (G.debug > 2)
		sk_warn("DGRAM %zu bytes port %u -> node %u ctx %u port %u", len, s->lport, node, ctx, dport);
	if (pn_port_isend(G.port, node, ctx, SK_CHAN_CTL, SK_DGRAM_TAG(s->lport, dport), copy, len, &ps->req) < 0) {
		free(copy);
		free(ps);
		G.stat[SK_ST_UDP_FAILED]++;
		return (ssize_t)len;
	}
	ps->own = copy;
	ps->len = len;
	ps->next = G.uh;
	G.uh = ps;
	G.uinflight += len;
	G.stat[SK_ST_UDP_SENT]++;
	return (ssize_t)len;
}

ssize_t sk_udp_sendmsg(struct sock *s, int fd, const struct msghdr *msg, int flags)
{
	const struct sockaddr *to = msg->msg_name;
	socklen_t tolen = msg->msg_namelen;
	size_t len = 0;
	uint32_t a;
	uint16_t port;
	int any, node, r;

	for (size_t i = 0; i < msg->msg_iovlen; i++)
		len += msg->msg_iov[i].iov_len;
	if (s->type == SK_UDP && (r = sk_udp_claim(s, 1)) < 0)
		return r;
	if (!to) {
		if (!s->peer_set || s->peer_node < 0) {
			if (s->type == SK_UDP && !s->os)
				return -EDESTADDRREQ;
			r = (int)REAL(sendmsg)(fd, msg, flags);
			return r < 0 ? -errno : r;
		}
		node = s->peer_node;
		port = s->pport;
	} else {
		node = sk_cluster_addr(to, tolen, &a, &port, &any);
		if (node == SK_BEYOND) {
			G.stat[SK_ST_BEYOND]++;
			return -EHOSTUNREACH;   /* beyond the job's nodes: never the OS's */
		}
		if (node < 0) {
			ssize_t n;
			if (s->type == SK_UDP && !s->os)
				return -ENETUNREACH;   /* bound to the cluster address: the cluster only */
			n = REAL(sendmsg)(fd, msg, flags);
			return n < 0 ? -errno : n;
		}
		if (!port)
			return -EINVAL;
	}
	if (s->type == SK_CAND && (r = udp_autobind(s, fd)) < 0)
		return r;
	if (!G.port)
		return -ENETUNREACH;
	return udp_send_cluster(s, (unsigned)node, port, msg, len, s->nonblock || (flags & MSG_DONTWAIT));
}

/* ---- receive ---------------------------------------------------------------------------------- */

/* Take the datagrams that have arrived (any port) into their sockets' queues. */
void sk_udp_pull(void)
{
	for (int i = 0; i < 256 && G.port; i++) {
		pn_port_status_t st;
		struct sock *s;
		struct dgram *d = NULL;
		uint16_t dport;
		int r = pn_port_probe(G.port, PN_PORT_ANY, PN_PORT_ANY, SK_CHAN_CTL, SK_TAG(SK_T_DGRAM, 0), SK_KIND_MASK,
				      &st);
		if (r != 1)
			break;
		dport = (uint16_t)(st.tag & 0xffff);
		s = udp_find(dport, sk_node_addr(&G.net, (unsigned)st.src_node), (uint16_t)(st.tag >> 16));
		if (s && s->qbytes + st.len <= G.rcvbuf)
			d = malloc(sizeof(*d) + (st.len ? st.len : 1));
		if (!d) {
			uint8_t junk[1];
			void *big = st.len > sizeof(junk) ? malloc(st.len) : NULL;
			pn_port_recv(G.port, st.src_node, st.src_ctx, SK_CHAN_CTL, st.tag, SK_ALL_MASK, big ? big : junk,
				     big ? st.len : sizeof(junk), NULL, 0);
			free(big);
			G.stat[s ? SK_ST_UDP_FULL : SK_ST_UDP_UNBOUND]++;
			continue;
		}
		r = pn_port_recv(G.port, st.src_node, st.src_ctx, SK_CHAN_CTL, st.tag, SK_ALL_MASK, d->data, st.len, &st,
				 0);
		if (r < 0) {
			free(d);
			G.stat[SK_ST_UDP_FAILED]++;
			continue;
		}
		d->len = (size_t)r;
		d->addr = sk_node_addr(&G.net, (unsigned)st.src_node);
		d->port = (uint16_t)(st.tag >> 16);
		d->next = NULL;
		if (s->qt_d)
			s->qt_d->next = d;
		else
			s->qh_d = d;
		s->qt_d = d;
		s->qbytes += d->len;
		G.stat[SK_ST_UDP_RECV]++;
	}
}

/* The first queued datagram the socket accepts (a connected one: from its peer only;
 * the others are dropped, as the kernel never queues them). */
static struct dgram *udp_head(struct sock *s)
{
	struct dgram *d;
	while ((d = s->qh_d) && s->peer_set &&
	       (s->peer_node < 0 || d->addr != s->paddr || d->port != s->pport)) {
		s->qh_d = d->next;
		if (!s->qh_d)
			s->qt_d = NULL;
		s->qbytes -= d->len;
		free(d);
	}
	return d;
}

size_t sk_udp_next_len(struct sock *s)
{
	struct dgram *d;
	if (sk_udp_claim(s, 0) < 0)
		return 0;
	sk_udp_pull();
	d = udp_head(s);
	return d ? d->len : 0;
}

static ssize_t udp_take(struct sock *s, struct dgram *d, struct msghdr *msg, int flags)
{
	size_t off = 0;
	for (size_t i = 0; i < msg->msg_iovlen && off < d->len; i++) {
		size_t n = d->len - off < msg->msg_iov[i].iov_len ? d->len - off : msg->msg_iov[i].iov_len;
		memcpy(msg->msg_iov[i].iov_base, d->data + off, n);
		off += n;
	}
	msg->msg_flags = off < d->len ? MSG_TRUNC : 0;
	if (msg->msg_name)
		sk_fill_addr(s->family, d->addr, d->port, msg->msg_name, &msg->msg_namelen);
	else
		msg->msg_namelen = 0;
	msg->msg_controllen = 0;
	if (!(flags & MSG_PEEK)) {
		s->qh_d = d->next;
		if (!s->qh_d)
			s->qt_d = NULL;
		s->qbytes -= d->len;
	}
	{
		ssize_t r = (flags & MSG_TRUNC) ? (ssize_t)d->len : (ssize_t)off;   /* as Linux */
		if (!(flags & MSG_PEEK))
			free(d);
		return r;
	}
}

ssize_t sk_udp_recvmsg(struct sock *s, int fd, struct msghdr *msg, int flags)
{
	struct pn_backoff b = {0};
	int nb = s->nonblock || (flags & MSG_DONTWAIT), r;

	if ((r = sk_udp_claim(s, 1)) < 0)
		return r;
	for (;;) {
		struct dgram *d;
		sk_udp_pull();
		if ((d = udp_head(s)))
			return udp_take(s, d, msg, flags);
		if (s->os && s->peer_set && s->peer_node >= 0) {
			char junk[1];   /* connected to a cluster peer: the OS side's are not from it */
			while (REAL(recv)(fd, junk, sizeof(junk), MSG_DONTWAIT) >= 0)
				;
		} else if (s->os) {
			ssize_t r = REAL(recvmsg)(fd, msg, flags | MSG_DONTWAIT);
			if (r >= 0)
				return r;
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				return -errno;
		}
		if (nb)
			return -EAGAIN;
		if (!G.port)
			return -EBADF;
		sk_service(0);
		if (s->os && b.n >= 20000) {   /* idle: wait in the kernel for the OS side, briefly */
			struct pollfd p = {.fd = fd, .events = POLLIN};
			struct timespec ts = {0, 50000};
			sk_leave();
			REAL(ppoll)(&p, 1, &ts, NULL);
			sk_enter();
			b.n++;
		} else {
			sk_pause(&b);
		}
		if (s->type != SK_UDP)
			return -EBADF;
	}
}

short sk_udp_readiness(struct sock *s, short events)
{
	short rev = 0;
	if (sk_udp_claim(s, 0) < 0 || !G.port)
		return POLLERR | POLLHUP;
	sk_udp_pull();
	if (G.uh)
		sk_udp_reap();
	if ((events & (POLLIN | POLLRDNORM)) && udp_head(s))
		rev |= (short)(events & (POLLIN | POLLRDNORM));
	if ((events & (POLLOUT | POLLWRNORM)) && G.uinflight < G.sndbuf)
		rev |= (short)(events & (POLLOUT | POLLWRNORM));
	return rev;
}

int sk_udp_peername(struct sock *s, int fd, struct sockaddr *sa, socklen_t *len)
{
	if (s->peer_set && s->peer_node >= 0)
		return sk_fill_addr(s->family, s->paddr, s->pport, sa, len);
	if (s->os)
		return REAL(getpeername)(fd, sa, len) < 0 ? -errno : 0;
	return -ENOTCONN;
}

void sk_udp_destroy(struct sock *s)
{
	for (struct sock **pp = &G.udps; *pp; pp = &(*pp)->unext)
		if (*pp == s) {
			*pp = s->unext;
			break;
		}
	if (s->dir && !udp_find(s->lport, 0, 0))   /* no other socket of ours shares it */
		sk_dir_del(SK_PROTO_UDP, s->lport);
	while (s->qh_d) {
		struct dgram *d = s->qh_d;
		s->qh_d = d->next;
		free(d);
	}
}
