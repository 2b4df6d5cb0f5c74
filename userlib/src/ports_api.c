/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * ports: the public API (pn_ports.h): open and close, sends and receives, requests,
 * information. Here are the argument checks and the blocking calls' waits; the work is
 * done by the progress engine (ports_recv.c), the send side (ports_send.c) and matching
 * (ports_match.c). The design of the layer is at the top of ports_int.h.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <unistd.h>

#include "ports_int.h"

/* ---- progress ----------------------------------------------------------------------------- */

static void hook(pn_hal_t *h, void *arg)
{
	(void)h;
	progress(arg);
}

int pn_port_progress(pn_port_t *p)
{
	if (!p)
		return -EINVAL;
	return progress(p);
}

/* ---- argument checks ----------------------------------------------------------------------- */

static int check_dst(const pn_port_t *p, unsigned node, unsigned ctx, int channel)
{
	if (node >= p->nodes)
		return -EHOSTUNREACH;
	if (ctx >= p->nctx)
		return -EINVAL;
	if (channel < 0 || channel > PN_PORT_MAX_CHANNEL)
		return -EINVAL;
	return 0;
}

static int check_buf(const void *buf, size_t len)
{
	if (len > (size_t)SSIZE_MAX || (!buf && len))
		return -EINVAL;
	if (len > PN_PORT_MAX_MSG)
		return -EMSGSIZE;
	return 0;
}

static int check_match(const pn_port_t *p, int node, int ctx, int channel)
{
	if (node < PN_PORT_ANY || ctx < PN_PORT_ANY || channel < PN_PORT_ANY || channel > PN_PORT_MAX_CHANNEL)
		return -EINVAL;
	if (node >= (int)p->nodes)
		return -EHOSTUNREACH;
	if (ctx >= (int)p->nctx)
		return -EINVAL;
	return 0;
}

/* ---- send API ----------------------------------------------------------------------------- */

static void req_init_send(struct pn_port_req *r, struct peer *pe, int channel, uint64_t tag, const void *buf,
			  size_t len, const pn_port_t *p)
{
	memset(r, 0, sizeof(*r));
	r->type = RQ_SEND;
	r->state = RQ_QUEUED;
	r->peer = pe;
	r->channel = (uint16_t)channel;
	r->tag = tag;
	r->sbuf = buf;
	r->len = len;
	r->registered = len > 0 && pn_mem_is_registered(p->h, buf, len);
	r->st.src_node = (int)p->node;
	r->st.src_ctx = (int)p->ctx;
	r->st.channel = channel;
	r->st.tag = tag;
	r->st.len = len;
}

int pn_port_isendx(pn_port_t *p, unsigned node, unsigned ctx, int channel, uint64_t tag, const void *buf,
		   size_t len, uint32_t data, unsigned flags, pn_port_req_t **req)
{
	struct pn_port_req *r;
	struct peer *pe;
	int rc;

	if (!p || !req)
		return -EINVAL;
	*req = NULL;
	if (flags & ~(unsigned)PN_PORT_DATA)
		return -EINVAL;
	if ((rc = check_dst(p, node, ctx, channel)) < 0 || (rc = check_buf(buf, len)) < 0)
		return rc;
	p->now = pn_deadline_ns(p->h);
	if (!(pe = pt_peer_get(p, node, ctx)) || !(r = malloc(sizeof(*r))))
		return -ENOMEM;
	req_init_send(r, pe, channel, tag, buf, len, p);
	if (flags & PN_PORT_DATA) {
		r->mflags = PW_MSG_DATA;
		r->imm = r->st.data = data;
		r->st.flags = PN_PORT_DATA;
	}
	pt_send_enqueue(p, pe, r);
	progress(p);
	*req = r;
	return 0;
}

int pn_port_isend(pn_port_t *p, unsigned node, unsigned ctx, int channel, uint64_t tag, const void *buf,
		  size_t len, pn_port_req_t **req)
{
	return pn_port_isendx(p, node, ctx, channel, tag, buf, len, 0, 0, req);
}

static int wait_req(pn_port_t *p, struct pn_port_req *r, int64_t timeout_ns, int stop_when_matched)
{
	struct pn_backoff b = {0};
	uint64_t t0 = pn_monotonic_ns();
	uint32_t spins = 0;
	int e;
	for (;;) {
		int n = progress(p);
		if (r->state == RQ_DONE)
			return 0;
		if (timeout_ns >= 0 && (!stop_when_matched || r->state == RQ_POSTED) &&
		    pn_monotonic_ns() - t0 >= (uint64_t)timeout_ns)
			return -ETIMEDOUT;
		/* A NIC that went away completes nothing more (the shm path needs none, but
		 * a request on it is done before this is asked 256 times in a row). */
		if (!n && (e = pn_wait_alive(p->h, &spins)) < 0)
			return e;
		if (n)
			pn_backoff_reset(&b);
		else
			pn_backoff_step(&b);
	}
}

int pn_port_send(pn_port_t *p, unsigned node, unsigned ctx, int channel, uint64_t tag, const void *buf,
		 size_t len)
{
	struct pn_port_req r;
	struct peer *pe;
	int rc;

	if (!p)
		return -EINVAL;
	if ((rc = check_dst(p, node, ctx, channel)) < 0 || (rc = check_buf(buf, len)) < 0)
		return rc;
	p->now = pn_deadline_ns(p->h);
	if (!(pe = pt_peer_get(p, node, ctx)))
		return -ENOMEM;
	req_init_send(&r, pe, channel, tag, buf, len, p);
	r.on_stack = 1;
	pt_send_enqueue(p, pe, &r);
	if (r.state != RQ_DONE)
		wait_req(p, &r, -1, 0);
	return r.st.error;
}

/* ---- receive API -------------------------------------------------------------------------- */

static void req_init_recv(struct pn_port_req *r, int node, int ctx, int channel, uint64_t tag, uint64_t mask,
			  void *buf, size_t cap)
{
	memset(r, 0, sizeof(*r));
	r->type = RQ_RECV;
	r->state = RQ_POSTED;
	r->m_node = node;
	r->m_ctx = ctx;
	r->m_chan = channel;
	r->m_tag = tag;
	r->m_mask = mask;
	r->rbuf = buf;
	r->cap = cap;
	r->st.src_node = r->st.src_ctx = r->st.channel = PN_PORT_ANY;
}

int pn_port_irecvx(pn_port_t *p, int src_node, int src_ctx, int channel, uint64_t tag, uint64_t mask, void *buf,
		   size_t cap, unsigned flags, pn_port_req_t **req)
{
	struct pn_port_req *r;
	int rc;

	if (!p || !req)
		return -EINVAL;
	*req = NULL;
	if (flags & ~(unsigned)PN_PORT_TRUNC)
		return -EINVAL;
	if ((rc = check_match(p, src_node, src_ctx, channel)) < 0)
		return rc;
	if (cap > (size_t)SSIZE_MAX || (!buf && cap))
		return -EINVAL;
	if (!(r = malloc(sizeof(*r))))
		return -ENOMEM;
	req_init_recv(r, src_node, src_ctx, channel, tag, mask, buf, cap);
	r->trunc = !!(flags & PN_PORT_TRUNC);
	progress(p);
	pt_recv_post(p, r);
	*req = r;
	return 0;
}

int pn_port_irecv(pn_port_t *p, int src_node, int src_ctx, int channel, uint64_t tag, uint64_t mask, void *buf,
		  size_t cap, pn_port_req_t **req)
{
	return pn_port_irecvx(p, src_node, src_ctx, channel, tag, mask, buf, cap, 0, req);
}

int pn_port_recv(pn_port_t *p, int src_node, int src_ctx, int channel, uint64_t tag, uint64_t mask, void *buf,
		 size_t cap, pn_port_status_t *st, int64_t timeout_ns)
{
	struct pn_port_req r;
	int rc;

	if (!p)
		return -EINVAL;
	if ((rc = check_match(p, src_node, src_ctx, channel)) < 0)
		return rc;
	if (cap > (size_t)SSIZE_MAX || (!buf && cap))
		return -EINVAL;
	req_init_recv(&r, src_node, src_ctx, channel, tag, mask, buf, cap);
	r.on_stack = 1;
	progress(p);
	pt_recv_post(p, &r);
	if (r.state != RQ_DONE && wait_req(p, &r, timeout_ns, 1) == -ETIMEDOUT) {
		rq_unlink(&r);
		return -ETIMEDOUT;
	}
	if (st)
		*st = r.st;
	return r.st.error ? r.st.error : (int)r.st.len;
}

int pn_port_probe(pn_port_t *p, int src_node, int src_ctx, int channel, uint64_t tag, uint64_t mask,
		  pn_port_status_t *st)
{
	struct pn_port_req r;
	int rc;

	if (!p)
		return -EINVAL;
	if ((rc = check_match(p, src_node, src_ctx, channel)) < 0)
		return rc;
	req_init_recv(&r, src_node, src_ctx, channel, tag, mask, NULL, 0);
	progress(p);
	for (struct imsg *m = p->unx_head; m; m = m->next)
		if (req_matches(&r, m->peer, m->channel, m->tag)) {
			if (st)
				fill_status(st, m->peer, m);
			return 1;
		}
	return 0;
}

/* ---- requests ----------------------------------------------------------------------------- */

static int req_collect(pn_port_req_t **req, pn_port_status_t *st)
{
	struct pn_port_req *r = *req;
	int err = r->st.error;
	if (st)
		*st = r->st;
	free(r);
	*req = NULL;
	return err ? err : 1;
}

int pn_port_test(pn_port_t *p, pn_port_req_t **req, pn_port_status_t *st)
{
	if (!p || !req || !*req)
		return -EINVAL;
	if ((*req)->state != RQ_DONE)
		progress(p);
	if ((*req)->state != RQ_DONE)
		return 0;
	return req_collect(req, st);
}

int pn_port_done(const pn_port_req_t *req)
{
	if (!req)
		return -EINVAL;
	return req->state == RQ_DONE;
}

int pn_port_wait(pn_port_t *p, pn_port_req_t **req, pn_port_status_t *st, int64_t timeout_ns)
{
	if (!p || !req || !*req)
		return -EINVAL;
	if ((*req)->state != RQ_DONE && wait_req(p, *req, timeout_ns, 0) == -ETIMEDOUT)
		return -ETIMEDOUT;
	return req_collect(req, st);
}

int pn_port_cancel(pn_port_t *p, pn_port_req_t **req)
{
	struct pn_port_req *r;
	if (!p || !req || !*req)
		return -EINVAL;
	r = *req;
	if (r->state == RQ_DONE)
		return -EALREADY;
	if (r->state != RQ_POSTED && r->state != RQ_QUEUED)
		return -EBUSY;
	rq_unlink(r);
	free(r);
	*req = NULL;
	return 0;
}

/* ---- open / close / information ------------------------------------------------------------ */

void pn_port_opts_init(pn_port_opts_t *o)
{
	if (!o)
		return;
	memset(o, 0, sizeof(*o));
	pn_open_opts_init(&o->hal);
	o->eager_max = -1;
	o->eager_window = -1;
	o->timeout_ms = -1;
	o->shm = -1;
}

static int env_long(const char *name, long *v)
{
	const char *s = getenv(name);
	char *end;
	if (!s || !*s)
		return 0;
	errno = 0;
	*v = strtol(s, &end, 0);
	return errno || *end ? -EINVAL : 0;
}

static uint32_t new_epoch(void)
{
	uint32_t e = 0;
	if (getrandom(&e, sizeof(e), GRND_NONBLOCK) != sizeof(e)) {
		uint64_t t = pn_monotonic_ns();
		e = (uint32_t)getpid() * 2654435761u ^ (uint32_t)t ^ (uint32_t)(t >> 29);
	}
	return e ? e : 1;
}

int pn_port_open(pn_port_t **out, const pn_port_opts_t *opts)
{
	pn_port_opts_t o;
	pn_port_t *p;
	long v;
	int r;

	if (!out)
		return -EINVAL;
	*out = NULL;
	if (opts)
		o = *opts;
	else
		pn_port_opts_init(&o);
	if (o.eager_max == -1) {
		v = PN_PORT_DEFAULT_EAGER_MAX;
		if ((r = env_long("PARANIC_EAGER_MAX", &v)) < 0)
			return r;
		o.eager_max = v;
	}
	if (o.eager_window == -1) {
		v = 0;
		if ((r = env_long("PARANIC_EAGER_WINDOW", &v)) < 0)
			return r;
		o.eager_window = v;
	}
	if (o.shm == -1) {
		v = 1;
		if ((r = env_long("PARANIC_PORT_SHM", &v)) < 0)
			return r;
		o.shm = (int)v;
	}
	if (o.shm != 0 && o.shm != 1)
		return -EINVAL;
	if (o.timeout_ms == -1) {
		v = PN_PORT_DEFAULT_TIMEOUT_MS;
		if ((r = env_long("PARANIC_PORT_TIMEOUT_MS", &v)) < 0)
			return r;
		o.timeout_ms = v;
	}
	if (o.eager_max < 0 || o.eager_max > (long)PN_PORT_EAGER_LIMIT || o.eager_window < 0 ||
	    o.eager_window > UINT32_MAX || o.timeout_ms < 1 || o.timeout_ms > 3600000)
		return -EINVAL;
	if (o.eager_window == 0) {
		o.eager_window = 8 * (o.eager_max + PN_PORT_MSG_COST);
		if (o.eager_window < 65536)
			o.eager_window = 65536;
	}
	if (o.eager_window < o.eager_max + PN_PORT_MSG_COST)
		return -EINVAL;

	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	if (!opts) {
		/* as pn_open(NULL): PARANIC_CTX picks the context */
		r = pn_open(&p->h, NULL);
	} else {
		r = pn_open(&p->h, &o.hal);
	}
	if (r < 0) {
		free(p);
		return r;
	}
	p->node = (uint32_t)pn_node_id(p->h);
	p->nodes = (uint32_t)pn_num_nodes(p->h);
	p->ctx = (uint32_t)pn_ctx_id(p->h);
	p->nctx = (uint32_t)pn_num_ctx(p->h);
	p->mtu = (uint32_t)pn_mtu(p->h);
	p->pio_max = (uint32_t)pn_pio_max(p->h);
	p->epoch = new_epoch();
	p->eager_max = o.eager_max;
	p->window = (uint64_t)o.eager_window;
	p->timeout_ns = (uint64_t)o.timeout_ms * 1000000ull;
	p->ping_ns = p->timeout_ns / 4;
	p->ctl_tail = &p->ctl_peers;
	p->now = pn_deadline_ns(p->h);
	p->peers = calloc(p->nodes, sizeof(*p->peers));
	if (!p->peers) {
		pn_close(p->h);
		free(p);
		return -ENOMEM;
	}
	p->bounce_ticket[0] = p->bounce_ticket[1] = pn_tx_posted(p->h);
	p->st.epoch = p->epoch;
	p->st.node = p->node;
	p->st.ctx = p->ctx;
	/* The intra-node path: our inbox (also when disabled, so that peers of our node
	 * learn to use the NIC with us); without one, everything goes by the NIC. */
	if (pn_shm_open(&p->shm, p->h->cluster, p->node, p->ctx, p->nctx, p->epoch, o.shm) == 0)
		p->shm_on = o.shm;
	else
		p->shm = NULL;
	pn_set_wait_hook(p->h, hook, p);
	*out = p;
	return 0;
}

static void free_all(pn_port_t *p)
{
	struct peer *pe, *nx;
	struct pn_port_req *r;
	struct imsg *m;

	while (p->cts_head) {
		struct cts *q = p->cts_head;
		p->cts_head = q->next;
		free(q);
	}
	while ((m = p->unx_head)) {
		unx_unlink(p, m);
		m->peer->eager_active = m->peer->eager_active == m ? NULL : m->peer->eager_active;
		buf_release(p, m);
		free(m);
	}
	for (pe = p->all_peers; pe; pe = pe->all_next) {
		if (pe->eager_active) {
			m = pe->eager_active;
			if (m->where == 0) {
				buf_release(p, m);
				free(m);
			}
			pe->eager_active = NULL;
		}
		while ((m = pe->held)) {
			pe->held = m->next;
			buf_release(p, m);
			free(m);
		}
		while ((r = pe->sendq.head)) {
			rq_unlink(r);
			if (!r->on_stack)
				free(r);
		}
	}
	/* Requests the caller still holds (posted, streaming, waiting) are freed with the port. */
	while ((r = p->posted.head)) {
		rq_unlink(r);
		if (!r->on_stack)
			free(r);
	}
	while ((r = p->streamq.head)) {
		rq_unlink(r);
		free(r);
	}
	while ((r = p->drainq.head)) {
		rq_unlink(r);
		free(r);
	}
	for (uint32_t i = 0; i < p->stab.cap; i++)
		if (p->stab.ptr[i])
			free(p->stab.ptr[i]);
	for (uint32_t i = 0; i < p->rtab.cap; i++)
		if (p->rtab.ptr[i])
			free(p->rtab.ptr[i]);
	pt_id_destroy(&p->stab);
	pt_id_destroy(&p->rtab);
	for (pe = p->all_peers; pe; pe = nx) {
		nx = pe->all_next;
		free(pe);
	}
	for (uint32_t n = 0; n < p->nodes; n++)
		free(p->peers[n]);
	free(p->peers);
}

int pn_port_close(pn_port_t *p)
{
	pn_hal_t *h;
	struct pn_backoff b = {0};
	uint64_t t0;

	if (!p)
		return -EINVAL;
	h = p->h;
	t0 = pn_deadline_ns(h);
	/* DMA in flight first (a CLOSE must not overtake data), at most the timeout. */
	while (!(tx_reached(h, h->tx_tail) && pio_free(h)) && pn_deadline_ns(h) - t0 < p->timeout_ns && !h->dead) {
		if (progress(p))
			pn_backoff_reset(&b);
		else
			pn_backoff_step(&b);
	}
	for (struct peer *pe = p->all_peers; pe; pe = pe->all_next) {
		struct pw_ctl c;
		if (pe->tx_state == TX_NONE && !pe->rx_known)
			continue;
		while (!pt_pkt_ready(p, pe, sizeof(c)) && pn_deadline_ns(h) - t0 < p->timeout_ns && !h->dead) {
			progress(p);
			pn_backoff_step(&b);
		}
		if (pe->path == PATH_SHM ? !pn_shm_room(pe->shm, sizeof(c)) : !pio_free(h)) {
			if (pe->path == PATH_SHM)
				continue;
			break;
		}
		pt_ctl_init(p, &c, pe->tx_state == TX_OPEN ? pe->tx_remote_epoch : pe->rx_epoch);
		pt_send_ctl(p, pe, PW_CLOSE, 0, &c);
	}
	/* Our rings stay readable for live peers that have not mapped them yet. */
	for (struct peer *pe = p->all_peers; pe; pe = pe->all_next) {
		pn_shm_link_close(p->shm, pe->shm, 1);
		pe->shm = NULL;
	}
	pn_shm_close(p->shm);
	p->shm = NULL;
	p->shm_on = 0;
	while (!pio_free(h) && pn_deadline_ns(h) - t0 < p->timeout_ns && !h->dead) {
		pn_progress(h);
		pn_backoff_step(&b);
	}
	pn_set_wait_hook(h, NULL, NULL);
	free_all(p);
	pn_close(h);
	free(p);
	return 0;
}

pn_hal_t *pn_port_hal(pn_port_t *p)
{
	return p ? p->h : NULL;
}

int pn_port_node(const pn_port_t *p)
{
	return p ? (int)p->node : -EINVAL;
}

int pn_port_ctx(const pn_port_t *p)
{
	return p ? (int)p->ctx : -EINVAL;
}

long pn_port_eager_max(const pn_port_t *p)
{
	return p ? p->eager_max : -EINVAL;
}

long pn_port_set_eager_max(pn_port_t *p, long bytes)
{
	long old;
	if (!p || bytes < 0 || bytes > (long)PN_PORT_EAGER_LIMIT || (uint64_t)bytes + PN_PORT_MSG_COST > p->window)
		return -EINVAL;
	old = p->eager_max;
	p->eager_max = bytes;
	return old;
}

int pn_port_stats(pn_port_t *p, pn_port_stats_t *st)
{
	if (!p || !st)
		return -EINVAL;
	*st = p->st;
	return 0;
}

int pn_port_mem_register(pn_port_t *p, void *buf, size_t len)
{
	long pg = sysconf(_SC_PAGESIZE);
	uintptr_t a, e;
	if (!p || !buf || !len || len > (size_t)SSIZE_MAX)
		return -EINVAL;
	a = (uintptr_t)buf & ~(uintptr_t)(pg - 1);
	e = (uintptr_t)buf + len;
	if (e < (uintptr_t)buf)
		return -EFAULT;
	/* madvise(MADV_NORMAL) fails with ENOMEM on any unmapped page of the range. */
	if (madvise((void *)a, e - a, MADV_NORMAL) < 0)
		return -EFAULT;
	return pn_mem_register(p->h, buf, len);
}

int pn_port_mem_deregister(pn_port_t *p, void *buf)
{
	if (!p)
		return -EINVAL;
	return pn_mem_deregister(p->h, buf);
}

int pn_port_barrier(pn_port_t *p)
{
	if (!p)
		return -EINVAL;
	progress(p);
	return pn_barrier(p->h);
}
