/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * libparanic_sock.so: the data of a TCP connection (sock_tcp.h): its sends (DATA, FIN,
 * CLOSE) and receives, write and read (blocking, non-blocking, vectored, MSG_PEEK,
 * MSG_WAITALL), shutdown, FIONREAD's count and the readiness poll and epoll report.
 */
#include "sock_tcp.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

/* ---- sends ----------------------------------------------------------------------------------- */

/* Send a message of the connection (DATA, FIN, CLOSE); own: a buffer freed when done. */
int sk_conn_isend(struct conn *c, unsigned kind, const void *buf, size_t len, void *own)
{
	struct psend *ps = malloc(sizeof(*ps));
	int r;
	if (!ps) {
		free(own);
		return -ENOMEM;
	}
	r = pn_port_isend(G.port, c->peer_node, c->peer_ctx, (int)(c->peer_id & 0xffff), SK_TAG(kind, c->peer_id),
			  buf, len, &ps->req);
	if (r < 0) {
		free(own);
		free(ps);
		return r;
	}
	ps->next = NULL;
	ps->len = len;
	ps->own = own;
	if (c->pt)
		c->pt->next = ps;
	else
		c->ph = ps;
	c->pt = ps;
	c->pbytes += len;
	return 0;
}

/* Collect finished sends (in order: they complete in order). */
void sk_conn_reap(struct conn *c)
{
	while (c->ph && G.port) {
		struct psend *ps = c->ph;
		int r = pn_port_test(G.port, &ps->req, NULL);
		if (r == 0)
			break;
		if (r < 0 && !c->error)
			c->error = sk_conn_err(r);
		c->ph = ps->next;
		if (!c->ph)
			c->pt = NULL;
		c->pbytes -= ps->len;
		free(ps->own);
		free(ps);
	}
}

/* Withdraw sends that have not started (after an error); started ones end by ports'
 * liveness. */
void sk_conn_cancel_sends(struct conn *c)
{
	struct psend **pp = &c->ph, *last = NULL;
	while (*pp) {
		struct psend *ps = *pp;
		if (pn_port_cancel(G.port, &ps->req) == 0) {
			*pp = ps->next;
			c->pbytes -= ps->len;
			free(ps->own);
			free(ps);
			continue;
		}
		last = ps;
		pp = &ps->next;
	}
	c->pt = last;
}

void sk_conn_send_close(struct conn *c)
{
	if (c->paused)
		c->defer_close = 1;   /* the peer forks: CLOSE goes where its RESUME says */
	else if (c->state == CS_OPEN && !c->error && G.port)
		sk_conn_isend(c, SK_T_CLOSE, NULL, 0, NULL);
}

/* ---- receives -------------------------------------------------------------------------------- */

/* A message of c's taken whole: DATA's length is returned; FIN and CLOSE set eof (CLOSE:
 * the peer closed), PAUSED answers a fork's pause; they carry nothing (0). */
static size_t took(struct conn *c, const pn_port_status_t *st, size_t len)
{
	switch (SK_TAG_KIND(st->tag)) {
	case SK_T_DATA:
		return len;
	case SK_T_CLOSE:
		c->peer_closed = c->got_close = 1;
		/* fall through */
	case SK_T_FIN:
		c->eof = 1;
		break;
	case SK_T_PAUSED:
		sk_tcp_paused_msg(c);
		break;
	}
	return 0;
}

/* The next message of c, if one has arrived: data that fits buf (cap) goes there (its
 * length is returned), longer data is staged; FIN/CLOSE set eof. *got: something was
 * taken. Receive errors set c->error. */
size_t sk_conn_poll_msg(struct conn *c, void *buf, size_t cap, int *got)
{
	pn_port_status_t st;
	struct chunk *k;
	int r;

	*got = 0;
	r = pn_port_recv(G.port, (int)c->peer_node, (int)c->peer_ctx, c->chan, c->id, SK_LOW_MASK, buf, cap, &st, 0);
	if (r == -ETIMEDOUT)
		return 0;
	if (r == -EMSGSIZE) {
		if (!(k = malloc(sizeof(*k) + st.len))) {
			c->error = ENOMEM;
			return 0;
		}
		r = pn_port_recv(G.port, (int)c->peer_node, (int)c->peer_ctx, c->chan, c->id, SK_LOW_MASK, k->data,
				 st.len, &st, 0);
		if (r < 0) {
			free(k);
			if (r != -ETIMEDOUT)
				c->error = sk_conn_err(r);
			return 0;
		}
		*got = 1;
		k->len = (size_t)r;
		k->off = 0;
		k->next = NULL;
		if (c->stl)
			c->stl->next = k;
		else
			c->sh = k;
		c->stl = k;
		c->sbytes += k->len;
		return 0;
	}
	if (r < 0) {
		c->error = sk_conn_err(r);
		return 0;
	}
	*got = 1;
	return took(c, &st, (size_t)r);
}

static int conn_probe(struct conn *c, pn_port_status_t *st)
{
	return pn_port_probe(G.port, (int)c->peer_node, (int)c->peer_ctx, c->chan, c->id, SK_LOW_MASK, st);
}

static int conn_peer_closed(struct conn *c)
{
	if (!c->peer_closed && pn_port_probe(G.port, (int)c->peer_node, (int)c->peer_ctx, c->chan,
					     SK_TAG(SK_T_CLOSE, c->id), SK_ALL_MASK, NULL) == 1)
		c->peer_closed = 1;
	return c->peer_closed;
}

/* ---- write ---------------------------------------------------------------------------------- */

/* A blocked write lets data of other connections in (into staged copies, up to the
 * receive buffer), so that two programs writing to each other before reading never
 * wait for each other's reads (what the kernel's socket buffers do). */
static void drain_incoming(void)
{
	for (struct conn *c = G.conns; c; c = c->next) {
		int got;
		if (!c->sk || c->closed || c->state != CS_OPEN || c->reading || c->eof || c->error ||
		    c->sbytes >= G.rcvbuf)
			continue;
		sk_conn_poll_msg(c, NULL, 0, &got);
	}
}

static int wait_open(struct sock *s, int nb)
{
	struct conn *c = s->c;
	if (c->state == CS_CONNECTING) {
		if (nb) {
			sk_connect_progress(c, pn_monotonic_ns());
			if (c->state == CS_CONNECTING)
				return -EAGAIN;
		}
		return sk_connect_wait(s);
	}
	if (c->state == CS_FAILED)
		return -(c->error ? c->error : ENOTCONN);
	return 0;
}

ssize_t sk_write(struct sock *s, const void *buf, size_t len, int flags, int *sigpipe)
{
	struct conn *c;
	int nb = s->nonblock || (flags & MSG_DONTWAIT), r;
	size_t off, piece;

	if (s->type != SK_CONN)
		return -ENOTCONN;
	if (!G.port)
		return -ENOTSUP;
	c = s->c;
	if ((r = wait_open(s, nb)) < 0)
		return r;
	sk_conn_reap(c);
	if (c->wr_shut || conn_peer_closed(c)) {
		if (!(flags & MSG_NOSIGNAL))
			*sigpipe = 1;
		return -EPIPE;
	}
	if (c->paused) {   /* the peer forks: nothing goes until its RESUME */
		struct pn_backoff b = {0};
		if (nb) {
			sk_service(0);
			if (c->paused)
				return -EAGAIN;
		}
		while (c->paused && !c->error && G.port) {
			sk_service(0);
			if (c->paused)
				sk_pause(&b);
		}
		if (!G.port)
			return -ENOTSUP;
	}
	if (c->error)
		return -c->error;
	if (!len)
		return 0;
	if (nb) {
		size_t room = G.sndbuf > c->pbytes ? G.sndbuf - c->pbytes : 0, n;
		if (!room) {
			sk_service(0);
			sk_conn_reap(c);
			room = G.sndbuf > c->pbytes ? G.sndbuf - c->pbytes : 0;
			if (!room)
				return -EAGAIN;
		}
		n = len < room ? len : room;
		for (off = 0; off < n; off += piece) {
			void *own;
			piece = n - off < SK_MSG_MAX ? n - off : SK_MSG_MAX;
			if (!(own = malloc(piece)))
				return off ? (ssize_t)off : -ENOBUFS;
			memcpy(own, (const uint8_t *)buf + off, piece);
			if ((r = sk_conn_isend(c, SK_T_DATA, own, piece, own)) < 0)
				return off ? (ssize_t)off : -sk_conn_err(r);
		}
		sk_conn_reap(c);
		return (ssize_t)n;
	}
	/* blocking: from the program's buffer, returning when the peer has all of it */
	for (off = 0; off < len; off += piece) {
		piece = len - off < SK_MSG_MAX ? len - off : SK_MSG_MAX;
		if ((r = sk_conn_isend(c, SK_T_DATA, (const uint8_t *)buf + off, piece, NULL)) < 0) {
			if (!off)
				return -sk_conn_err(r);
			len = off;   /* what was posted goes; report that */
			break;
		}
	}
	{
		struct pn_backoff b = {0};
		uint64_t t0 = pn_monotonic_ns();
		for (;;) {
			uint64_t now;
			sk_conn_reap(c);
			if (!c->ph)
				break;
			if (c->error)
				sk_conn_cancel_sends(c);
			if (!c->ph)
				break;
			sk_service(0);
			now = pn_monotonic_ns();
			sk_pid_check(c, now);
			if (now - t0 > SK_DRAIN_AFTER_NS)
				drain_incoming();
			sk_pause(&b);
			if (!G.port)   /* the process is exiting under us: ports freed the requests */
				return -ENOTSUP;
		}
	}
	if (c->error) {
		if (c->peer_closed || conn_peer_closed(c)) {
			if (!(flags & MSG_NOSIGNAL))
				*sigpipe = 1;
			return -EPIPE;
		}
		return -c->error;
	}
	return (ssize_t)len;
}

ssize_t sk_writev(struct sock *s, const struct iovec *iov, int n, int flags, int *sigpipe)
{
	size_t total = 0, done = 0;
	if (n < 0 || n > IOV_MAX)
		return -EINVAL;
	for (int i = 0; i < n; i++) {
		if (iov[i].iov_len > SSIZE_MAX - total)
			return -EINVAL;
		total += iov[i].iov_len;
	}
	if (total <= 65536) {
		uint8_t *g = malloc(total ? total : 1);
		ssize_t r;
		if (!g)
			return -ENOBUFS;
		for (int i = 0; i < n; i++) {
			if (iov[i].iov_len)
				memcpy(g + done, iov[i].iov_base, iov[i].iov_len);
			done += iov[i].iov_len;
		}
		r = sk_write(s, g, total, flags, sigpipe);
		free(g);
		return r;
	}
	for (int i = 0; i < n; i++) {
		ssize_t r;
		if (!iov[i].iov_len)
			continue;
		r = sk_write(s, iov[i].iov_base, iov[i].iov_len, flags, sigpipe);
		if (r < 0)
			return done ? (ssize_t)done : r;
		done += (size_t)r;
		if ((size_t)r < iov[i].iov_len)
			break;
	}
	return (ssize_t)done;
}

/* ---- read ----------------------------------------------------------------------------------- */

static size_t stage_copy(struct conn *c, uint8_t *dst, size_t len, int peek)
{
	size_t n = 0;
	for (struct chunk *k = c->sh; k && n < len;) {
		size_t m = k->len - k->off;
		if (m > len - n)
			m = len - n;
		memcpy(dst + n, k->data + k->off, m);
		n += m;
		if (peek) {
			k = k->next;
			continue;
		}
		k->off += m;
		c->sbytes -= m;
		if (k->off == k->len) {
			c->sh = k->next;
			if (!c->sh)
				c->stl = NULL;
			free(k);
			k = c->sh;
		}
	}
	return n;
}

/* Wait for the next message with a receive posted into the program's buffer (one copy
 * from the NIC's ring). Returns the bytes placed there; FIN/CLOSE set eof; a message
 * longer than cap stays queued (the caller stages it). */
static size_t read_posted(struct conn *c, uint8_t *buf, size_t cap)
{
	pn_port_req_t *rq;
	pn_port_status_t st;
	struct pn_backoff b = {0};
	uint32_t moves = c->moves;
	int r = pn_port_irecv(G.port, (int)c->peer_node, (int)c->peer_ctx, c->chan, c->id, SK_LOW_MASK, buf, cap, &rq);
	if (r < 0) {
		c->error = sk_conn_err(r);
		return 0;
	}
	c->reading = 1;
	for (;;) {
		r = pn_port_test(G.port, &rq, &st);
		if (r == 1) {
			c->reading = 0;
			return took(c, &st, st.len);
		}
		if (r < 0) {
			c->reading = 0;
			if (r != -EMSGSIZE)
				c->error = sk_conn_err(r);
			return 0;
		}
		sk_service(0);
		sk_pid_check(c, pn_monotonic_ns());
		if ((c->error || c->moves != moves) && pn_port_cancel(G.port, &rq) == 0) {
			c->reading = 0;   /* (moved: the caller posts again, from the peer's new port) */
			return 0;
		}
		sk_pause(&b);
		if (!G.port) {   /* the process is exiting under us */
			c->reading = 0;
			return 0;
		}
	}
}

ssize_t sk_read(struct sock *s, void *buf, size_t len, int flags)
{
	struct conn *c;
	int peek = !!(flags & MSG_PEEK), waitall = (flags & MSG_WAITALL) && !peek;
	int nb = s->nonblock || (flags & MSG_DONTWAIT), r;
	uint8_t *dst = buf;
	size_t total = 0;
	struct pn_backoff b = {0};

	if (s->type != SK_CONN)
		return -ENOTCONN;
	if (!G.port)
		return -ENOTSUP;
	c = s->c;
	if ((r = wait_open(s, nb)) < 0)
		return r;
	if (c->rd_shut || !len)
		return 0;
	for (;;) {
		int got;
		size_t n;
		if (c->sbytes) {
			total += stage_copy(c, dst + total, len - total, peek);
			if (peek || total == len || !waitall)
				return (ssize_t)total;
		}
		if (c->eof)
			return (ssize_t)total;
		n = sk_conn_poll_msg(c, peek ? NULL : dst + total, peek ? 0 : len - total, &got);
		if (got) {
			total += n;
			if (total && (total == len || !waitall))
				return (ssize_t)total;
			pn_backoff_reset(&b);
			continue;
		}
		if (c->error)
			return total ? (ssize_t)total : -c->error;
		if (nb)
			return total ? (ssize_t)total : -EAGAIN;
		if (!peek && !c->reading) {
			n = read_posted(c, dst + total, len - total);
			total += n;
			if (total && (total == len || !waitall))
				return (ssize_t)total;
			if (!G.port)
				return total ? (ssize_t)total : -ENOTSUP;
			continue;
		}
		sk_service(0);
		sk_pid_check(c, pn_monotonic_ns());
		sk_pause(&b);
		if (!G.port)
			return total ? (ssize_t)total : -ENOTSUP;
	}
}

ssize_t sk_readv(struct sock *s, const struct iovec *iov, int n, int flags)
{
	size_t done = 0;
	if (n < 0 || n > IOV_MAX)
		return -EINVAL;
	for (int i = 0; i < n; i++) {
		ssize_t r;
		if (!iov[i].iov_len)
			continue;
		r = sk_read(s, iov[i].iov_base, iov[i].iov_len, flags);
		if (r < 0)
			return done ? (ssize_t)done : r;
		done += (size_t)r;
		if ((size_t)r < iov[i].iov_len || (flags & MSG_PEEK))
			break;
		if (!(flags & MSG_WAITALL))
			flags |= MSG_DONTWAIT;   /* the rest only if it is there already */
	}
	return (ssize_t)done;
}

size_t sk_available(struct sock *s)
{
	pn_port_status_t st;
	size_t n;
	if (s->type != SK_CONN || !G.port || s->c->state != CS_OPEN)
		return 0;
	n = s->c->sbytes;
	if (conn_probe(s->c, &st) == 1 && SK_TAG_KIND(st.tag) == SK_T_DATA)
		n += st.len;
	return n;
}

int sk_shutdown(struct sock *s, int how)
{
	struct conn *c;
	if (how != SHUT_RD && how != SHUT_WR && how != SHUT_RDWR)
		return -EINVAL;
	if (s->type != SK_CONN || s->c->state != CS_OPEN)
		return -ENOTCONN;
	if (!G.port)
		return -ENOTSUP;
	c = s->c;
	if (how != SHUT_WR)
		c->rd_shut = 1;
	if (how != SHUT_RD && !c->wr_shut) {
		c->wr_shut = 1;
		if (c->paused)
			c->defer_fin = 1;   /* after the forking peer's RESUME */
		else if (!c->error)
			sk_conn_isend(c, SK_T_FIN, NULL, 0, NULL);
	}
	return 0;
}

short sk_readiness(struct sock *s, short events)
{
	short rev = 0;
	struct conn *c;
	pn_port_status_t st;

	if (s->type == SK_CONN && s->c && s->c->fs)
		sk_tcp_claim(s);   /* shared over fork: polling it is using it */
	if (s->stale)
		return POLLERR | POLLHUP;
	switch (s->type) {
	case SK_UDP:
		return sk_udp_readiness(s, events);
	case SK_LISTEN:
		return s->qh ? (short)(events & (POLLIN | POLLRDNORM)) : 0;
	case SK_BOUND:
		return (short)(POLLHUP | (events & POLLOUT));
	case SK_CONN:
		break;
	default:
		return 0;
	}
	if (!G.port)
		return POLLERR | POLLHUP;
	c = s->c;
	if (c->state == CS_CONNECTING)
		sk_connect_progress(c, pn_monotonic_ns());
	if (c->state == CS_CONNECTING)
		return 0;
	if (c->state == CS_FAILED)
		return (short)(POLLERR | POLLHUP | (events & (POLLIN | POLLOUT | POLLRDNORM | POLLWRNORM)));
	sk_conn_reap(c);
	if (events & (POLLIN | POLLRDNORM | POLLRDHUP)) {
		int readable = c->sbytes || c->eof || c->rd_shut || c->error;
		if (!readable && !c->reading && conn_probe(c, &st) == 1) {
			readable = 1;
			if (SK_TAG_KIND(st.tag) != SK_T_DATA)
				rev |= (short)(events & POLLRDHUP);
		}
		if (readable)
			rev |= (short)(events & (POLLIN | POLLRDNORM));
		if (c->eof)
			rev |= (short)(events & POLLRDHUP);
	}
	if ((events & (POLLOUT | POLLWRNORM)) &&
	    (c->error || c->wr_shut || c->peer_closed || (c->pbytes < G.sndbuf && !c->paused)))
		rev |= (short)(events & (POLLOUT | POLLWRNORM));
	if (s->zc_done != s->zc_next)
		rev |= POLLERR;   /* a MSG_ZEROCOPY completion waits on the error queue */
	if (c->error)
		rev |= POLLERR | POLLHUP;
	else if (c->eof && (c->wr_shut || c->peer_closed))
		rev |= POLLHUP;
	return rev;
}
