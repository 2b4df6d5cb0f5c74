/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * libparanic_sock.so: a TCP connection's life (sock_tcp.h describes the protocol): its
 * channel and id, connect (REQ, ACK, retries while nobody listens, the timeout), listen
 * and the listener's answer to a REQ, accept, the peer's liveness, close and the
 * draining of a closed connection; and sk_service, which the library runs whenever it
 * is called, to answer requests and move every connection (and the UDP queues) on.
 */
#include "sock_tcp.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

/* ---- a connection ---------------------------------------------------------------------------- */

static struct conn *conn_new(void)
{
	struct conn *c;
	uint32_t ch = 0;
	for (unsigned i = 0; i < 65535; i++) {
		uint32_t x = G.next_chan;
		G.next_chan = x >= 65535 ? 1 : x + 1;
		if (!(G.chan_used[x / 64] & (1ull << (x % 64)))) {
			ch = x;
			break;
		}
	}
	if (!ch || !(c = calloc(1, sizeof(*c))))
		return NULL;
	G.chan_used[ch / 64] |= 1ull << (ch % 64);
	G.gen++;
	c->chan = (uint16_t)ch;
	c->id = (G.gen << 16) | ch;
	c->home_pid = (int32_t)getpid();
	c->next = G.conns;
	if (G.conns)
		G.conns->prev = c;
	G.conns = c;
	return c;
}

/* A forked child's copy of a connection it takes over (sock_tcp_fork.c): a channel and
 * id of its own port, in its list; the parent's requests are not its. */
int sk_conn_adopt(struct conn *c)
{
	struct conn *n = conn_new();
	if (!n)
		return -ENOBUFS;
	/* n holds the new channel and the list place; c keeps its state and takes them */
	c->chan = n->chan;
	c->id = n->id;
	c->home_pid = n->home_pid;
	c->next = n->next;
	c->prev = NULL;
	if (c->next)
		c->next->prev = c;
	G.conns = c;
	free(n);
	c->ph = c->pt = NULL;
	c->pbytes = 0;
	c->req_send = c->ack_req = NULL;
	c->reading = 0;
	c->qnext = NULL;
	c->live_at = pn_monotonic_ns() + SK_LIVE_NS;
	return 0;
}

struct conn *sk_conn_find(uint32_t id)
{
	for (struct conn *c = G.conns; c; c = c->next)
		if (c->id == id)
			return c;
	return NULL;
}

void sk_conn_unlink(struct conn *c)
{
	if (c->prev)
		c->prev->next = c->next;
	else if (G.conns == c)
		G.conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	c->next = c->prev = NULL;
	G.chan_used[c->chan / 64] &= ~(1ull << (c->chan % 64));
}

static void stage_free(struct conn *c)
{
	while (c->sh) {
		struct chunk *k = c->sh;
		c->sh = k->next;
		free(k);
	}
	c->stl = NULL;
	c->sbytes = 0;
}

static void conn_free(struct conn *c)
{
	sk_conn_unlink(c);
	stage_free(c);
	free(c);
}

static void conn_opened(struct conn *c, uint32_t peer_id, int32_t pid, const uint8_t *boot, uint64_t now)
{
	c->state = CS_OPEN;
	if (!c->moves) {   /* (the peer's RESUME, taken before its ACK, says where it is now) */
		c->peer_id = peer_id;
		c->peer_pid = pid;
		c->pid_ok = G.local_pids && !memcmp(boot, G.boot, sizeof(G.boot));
	}
	c->live_at = now + SK_LIVE_NS;
	G.stat[SK_ST_TCP_OPENED]++;
	if (c->peer_node != G.node)
		G.stat[SK_ST_TCP_REMOTE]++;
}

/* A pid of 0 (no owner recorded) counts as alive here. */
static int pid_alive(int32_t pid)
{
	return pid <= 0 || pn_pid_alive((uint32_t)pid);
}

/* A peer on this host whose process is gone: the connection is reset, SK_DEAD_GRACE_NS
 * after its death was first seen. The grace is for data the peer sent before it exited
 * and that is still on the way (its sends completed when its NIC had read the data: on
 * sim the packets may still be in the simulated network for a while); it arrives and
 * is read, then the peer's CLOSE ends the connection normally. */
void sk_pid_check(struct conn *c, uint64_t now)
{
	/* paused by a forking peer: its pid is not the one that goes on (RESUME says) */
	if (!c->pid_ok || c->error || c->state != CS_OPEN || now < c->live_at || c->paused || c->fs)
		return;
	c->live_at = now + (G.finished ? SK_LIVE_NS / 100 : SK_LIVE_NS);
	if (pid_alive(c->peer_pid)) {
		c->dead_at = 0;
		return;
	}
	if (!c->dead_at)
		c->dead_at = now;
	if (now - c->dead_at >= SK_DEAD_GRACE_NS || G.finished) {
		c->error = ECONNRESET;
		if (G.debug)
			sk_warn("connection %08x: peer process %d is gone", c->id, (int)c->peer_pid);
	}
}

/* ---- connect --------------------------------------------------------------------------------- */

/* Send REQ to the process whose port listens on (node, rport): the node's directory
 * names its context. Nobody there: -ECONNREFUSED. */
static int connect_send(struct conn *c)
{
	unsigned ctx;
	int r;
	if (sk_dir_lookup(c->peer_node, SK_PROTO_TCP, c->rport, &ctx, NULL) < 0)
		return -ECONNREFUSED;
	if (c->ack_req && ctx != c->peer_ctx && pn_port_cancel(G.port, &c->ack_req) < 0)
		return -EBUSY;
	c->peer_ctx = ctx;
	r = pn_port_isend(G.port, c->peer_node, c->peer_ctx, SK_CHAN_CTL, SK_TAG(SK_T_REQ, c->rport), &c->req,
			      sizeof(c->req), &c->req_send);
	if (r < 0)
		return r;
	if (!c->ack_req)
		r = pn_port_irecv(G.port, (int)c->peer_node, (int)c->peer_ctx, SK_CHAN_CTL, SK_TAG(SK_T_ACK, c->req_id),
				  SK_ALL_MASK, &c->ack, sizeof(c->ack), &c->ack_req);
	return r;
}

static void conn_fail(struct conn *c, int err)
{
	if (c->ack_req)
		pn_port_cancel(G.port, &c->ack_req);   /* if matched, it completes and is collected later */
	c->state = CS_FAILED;
	c->error = err;
	if (c->sk)
		c->sk->so_error = err;
}

/* The REQ's send: a port that never answered (no process there yet) refuses. */
static void ctl_reap(struct conn *c, uint64_t now)
{
	if (c->req_send && G.port) {
		int r = pn_port_test(G.port, &c->req_send, NULL);
		if (r < 0 && c->state == CS_CONNECTING) {
			if (r == -ECONNREFUSED && !c->closed && now - c->t0 < G.connect_wait_ns)
				c->retry_at = now + SK_RETRY_NS;
			else
				conn_fail(c, sk_conn_err(r));
		}
	}
}

void sk_connect_progress(struct conn *c, uint64_t now)
{
	pn_port_status_t st;
	int r;

	ctl_reap(c, now);
	if (c->ack_req) {
		r = pn_port_test(G.port, &c->ack_req, &st);
		if (r == 1 && c->state == CS_CONNECTING) {
			struct sk_ack ack;
			if (sk_parse_ack(&c->ack, st.len, &ack) < 0) {
				conn_fail(c, EPROTO);
			} else if (ack.status == 0) {
				conn_opened(c, ack.conn, ack.pid, ack.boot, now);
				if (c->closed)
					sk_conn_send_close(c);
			} else if (ack.status == ECONNREFUSED && !c->closed && now - c->t0 < G.connect_wait_ns) {
				c->retry_at = now + SK_RETRY_NS;   /* PARANIC_SOCK_CONNECT_WAIT_MS: try again */
			} else {
				conn_fail(c, ack.status);
			}
		} else if (r < 0 && c->state == CS_CONNECTING) {
			conn_fail(c, sk_conn_err(r));
		}
	}
	if (c->state != CS_CONNECTING)
		return;
	if (c->retry_at) {
		if (c->closed) {
			conn_fail(c, ECONNREFUSED);
			return;
		}
		if (now >= c->retry_at && !c->req_send) {
			c->retry_at = 0;
			if ((r = connect_send(c)) == -ECONNREFUSED && now - c->t0 < G.connect_wait_ns) {
				c->retry_at = now + SK_RETRY_NS;
			} else if (r < 0) {
				conn_fail(c, r == -EBUSY ? ECONNREFUSED : sk_conn_err(r));
				return;
			}
		}
	}
	if (now - c->t0 >= G.connect_timeout_ns)
		conn_fail(c, ETIMEDOUT);
}

int sk_connect(struct sock *s, uint32_t addr, uint16_t port, int node)
{
	struct conn *c;
	int r;

	if (!sk_port())
		return -ENETUNREACH;
	if (!(c = conn_new()))
		return -ENOBUFS;
	c->peer_node = (unsigned)node;
	c->raddr = addr;
	c->rport = port;
	c->laddr = G.my_addr;
	c->lport = s->lport ? s->lport : sk_ephemeral_port();
	c->req_id = ++G.next_req;
	c->req.magic = SK_WIRE_MAGIC;
	c->req.version = SK_WIRE_VERSION;
	c->req.req_id = c->req_id;
	c->req.conn = c->id;
	c->req.src_addr = c->laddr;
	c->req.dst_addr = addr;
	c->req.src_port = c->lport;
	c->req.dst_port = port;
	c->req.pid = (int32_t)getpid();
	memcpy(c->req.boot, G.boot, sizeof(G.boot));
	c->t0 = pn_monotonic_ns();
	c->state = CS_CONNECTING;
	s->type = SK_CONN;
	s->c = c;
	s->laddr = c->laddr;
	s->lport = c->lport;
	s->os = 0;
	c->sk = s;
	if ((r = connect_send(c)) == -ECONNREFUSED && G.connect_wait_ns)
		c->retry_at = c->t0 + SK_RETRY_NS;   /* PARANIC_SOCK_CONNECT_WAIT_MS: nobody there yet */
	else if (r < 0)
		conn_fail(c, sk_conn_err(r));
	return 0;
}

int sk_connect_wait(struct sock *s)
{
	struct conn *c = s->c;
	struct pn_backoff b = {0};
	while (c->state == CS_CONNECTING && G.port) {
		sk_service(0);
		sk_connect_progress(c, pn_monotonic_ns());
		if (c->state != CS_CONNECTING)
			break;
		sk_pause(&b);
	}
	if (c->state == CS_OPEN)
		return 0;
	s->so_error = 0;
	return -(c->error ? c->error : ENOTSUP);
}

/* ---- listen, accept -------------------------------------------------------------------------- */

int sk_listen(struct sock *s)
{
	if (!sk_port())
		return -ENETDOWN;
	if (s->type == SK_LISTEN)
		return 0;
	if (sk_listener_for(s->lport, s->os ? 0 : s->laddr))
		return -EADDRINUSE;
	if (s->os)
		s->laddr = 0;   /* the wildcard: every address of this node */
	s->type = SK_LISTEN;
	s->lnext = G.listeners;
	G.listeners = s;
	return 0;
}

struct sock *sk_listener_for(uint16_t port, uint32_t addr)
{
	for (struct sock *l = G.listeners; l; l = l->lnext)
		if (l->lport == port && (l->laddr == 0 || l->laddr == addr))
			return l;
	return NULL;
}

/* A send no connection owns (a listener's ACK): collected by sk_service when done. */
void sk_detached_send(unsigned node, unsigned ctx, int chan, uint64_t tag, void *buf, size_t len)
{
	struct psend *ps = malloc(sizeof(*ps));
	if (!ps || pn_port_isend(G.port, node, ctx, chan, tag, buf, len, &ps->req) < 0) {
		free(ps);
		free(buf);
		return;
	}
	ps->own = buf;
	ps->len = len;
	ps->next = G.dh;
	G.dh = ps;
}

static void detached_reap(void)
{
	for (struct psend **pp = &G.dh; *pp;) {
		struct psend *ps = *pp;
		if (pn_port_test(G.port, &ps->req, NULL) == 0) {
			pp = &ps->next;
			continue;
		}
		*pp = ps->next;
		free(ps->own);
		free(ps);
	}
}

static void handle_req(unsigned node, unsigned ctx, const struct sk_req *rq, uint64_t now)
{
	struct sk_ack *ack = calloc(1, sizeof(*ack));
	struct sock *l;
	struct conn *c = NULL;

	if (!ack)
		return;
	ack->magic = SK_WIRE_MAGIC;
	ack->req_id = rq->req_id;
	ack->pid = (int32_t)getpid();
	memcpy(ack->boot, G.boot, sizeof(G.boot));
	l = sk_listener_for(rq->dst_port, rq->dst_addr);
	if (!l || rq->dst_addr != G.my_addr)
		ack->status = ECONNREFUSED;
	else if (!(c = conn_new()))
		ack->status = ENOBUFS;
	if (c) {
		c->peer_node = node;
		c->peer_ctx = ctx;
		c->laddr = G.my_addr;
		c->lport = rq->dst_port;
		c->raddr = rq->src_addr;
		c->rport = rq->src_port;
		conn_opened(c, rq->conn, rq->pid, rq->boot, now);
		if (l->qt)
			l->qt->qnext = c;
		else
			l->qh = c;
		l->qt = c;
		ack->conn = c->id;
	}
	if (G.debug > 1)
		sk_warn("REQ from node %u ctx %u for port %u: %s", node, ctx, rq->dst_port, c ? "accepted" : "refused");
	sk_detached_send(node, ctx, SK_CHAN_CTL, SK_TAG(SK_T_ACK, rq->req_id), ack, sizeof(*ack));
}

int sk_accept(struct sock *s, int fd, struct sockaddr *sa, socklen_t *len, int flags)
{
	struct pn_backoff b = {0};
	int nb;

	for (;;) {
		sk_service(1);   /* answers connection requests: what accept waits for */
		if (s->qh) {
			struct conn *c = s->qh;
			struct sock *ns;
			int e = eventfd(0, EFD_NONBLOCK | ((flags & SOCK_CLOEXEC) ? EFD_CLOEXEC : 0));
			if (e < 0)
				return -errno;
			if (e >= SK_MAX_FD || !(ns = sk_new(SK_CONN, s->family))) {
				REAL(close)(e);
				return -EMFILE;
			}
			s->qh = c->qnext;
			if (!s->qh)
				s->qt = NULL;
			c->qnext = NULL;
			ns->nonblock = !!(flags & SOCK_NONBLOCK);
			ns->laddr = c->laddr;
			ns->lport = c->lport;
			ns->sndbuf = s->sndbuf;
			ns->rcvbuf = s->rcvbuf;
			ns->c = c;
			c->sk = ns;
			sk_set_fd(e, ns);
			sk_fill_addr(s->family, c->raddr, c->rport, sa, len);
			return e;
		}
		if (s->os) {
			int fl = REAL(fcntl)(fd, F_GETFL);
			struct pollfd p = {.fd = fd, .events = POLLIN};
			nb = fl >= 0 && (fl & O_NONBLOCK);
			if (nb || REAL(poll)(&p, 1, 0) > 0) {
				int r = REAL(accept4)(fd, sa, len, flags);
				if (r >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK))
					return r < 0 ? -errno : r;
			}
		} else {
			nb = s->nonblock;
		}
		if (nb)
			return -EAGAIN;
		if (!G.port)
			return -EINVAL;
		sk_pause(&b);
	}
}

/* ---- close ----------------------------------------------------------------------------------- */

static int conn_done(const struct conn *c)
{
	return c->closed && (c->state == CS_FAILED || c->got_close || c->error) && !c->ph && !c->req_send && !c->ack_req;
}

/* A closed connection: finish its sends, discard what still comes until the peer's
 * FIN/CLOSE, then free it. */
static void zombie_progress(struct conn *c, uint64_t now)
{
	sk_conn_reap(c);
	ctl_reap(c, now);
	if (c->state == CS_CONNECTING)
		sk_connect_progress(c, now);
	if (c->state == CS_OPEN && !c->got_close && !c->error) {
		for (int i = 0; i < 64 && !c->got_close && !c->error; i++) {
			int got;
			sk_conn_poll_msg(c, NULL, 0, &got);
			stage_free(c);
			if (!got)
				break;
		}
	}
	sk_pid_check(c, now);
	if (c->error && c->ph)
		sk_conn_cancel_sends(c);
	if (c->ack_req && c->state == CS_FAILED)
		pn_port_test(G.port, &c->ack_req, NULL);
	if (conn_done(c))
		conn_free(c);
}

/* The program closed c (or never accepted it). */
void sk_conn_close(struct conn *c)
{
	c->sk = NULL;
	c->closed = 1;
	stage_free(c);
	if (!G.port) {   /* after fork or exit: nothing to tell */
		conn_free(c);
		return;
	}
	if (c->state == CS_OPEN && !c->error)
		sk_conn_send_close(c);
	zombie_progress(c, pn_monotonic_ns());
}

/* ---- service --------------------------------------------------------------------------------- */

void sk_service(int force)
{
	uint64_t now;
	if (!G.port)
		return;
	now = pn_monotonic_ns();
	if (!force && now - G.last_service < SK_SERVICE_NS)
		return;
	G.last_service = now;
	for (int i = 0; i < 256; i++) {
		struct sk_req buf, rq;
		pn_port_status_t st;
		int r = pn_port_recv(G.port, PN_PORT_ANY, PN_PORT_ANY, SK_CHAN_CTL, SK_TAG(SK_T_REQ, 0), SK_KIND_MASK, &buf,
				     sizeof(buf), &st, 0);
		if (r == -EMSGSIZE) {   /* not ours: take it out of the way */
			void *junk = malloc(st.len);
			if (junk)
				pn_port_recv(G.port, st.src_node, st.src_ctx, SK_CHAN_CTL, st.tag, SK_ALL_MASK, junk, st.len,
					     NULL, 0);
			free(junk);
			continue;
		}
		if (r < 0)
			break;
		if (sk_parse_req(&buf, (size_t)r, &rq) < 0)
			continue;
		handle_req((unsigned)st.src_node, (unsigned)st.src_ctx, &rq, now);
	}
	/* An ACK nobody waits for (its connect gave up): out of the way. Every connect posts
	 * its receive before its REQ can be answered, so a waiting ACK is a stray. */
	for (int i = 0; i < 64; i++) {
		struct sk_ack ack;
		if (pn_port_recv(G.port, PN_PORT_ANY, PN_PORT_ANY, SK_CHAN_CTL, SK_TAG(SK_T_ACK, 0), SK_KIND_MASK, &ack,
				 sizeof(ack), NULL, 0) == -ETIMEDOUT)
			break;
	}
	if (G.dh)
		detached_reap();
	sk_tcp_fork_ctl(now);
	sk_udp_pull();
	if (G.uh)
		sk_udp_reap();
	for (struct conn *c = G.conns, *nx; c; c = nx) {
		nx = c->next;
		if (c->fs)
			continue;   /* paused and shared over fork: whoever takes it moves it on */
		if (c->closed) {
			zombie_progress(c, now);
			continue;
		}
		if (c->state == CS_CONNECTING || c->req_send || c->ack_req)
			sk_connect_progress(c, now);
		sk_pid_check(c, now);
	}
}
