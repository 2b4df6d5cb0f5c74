/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Endpoints (FI_EP_RDM). An endpoint opens a port (pn_port_open(NULL): the context from
 * the environment, as every libparanic program: PARANIC_BACKEND, PARANIC_NODE,
 * PARANIC_CLUSTER ...) when it is created, so fi_getname works before fi_enable. Every
 * operation is a ports request in the endpoint's list; pfi_ep_progress (run by the CQ
 * reads) turns the completed ones into CQ entries, in posting order.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pfi.h"

#define CLOSE_DRAIN_NS 2000000000ull   /* at close, sends still in flight get this long */

/* The ports layer's -errno as libfabric's -FI_E*: the same numbers (fi_errno.h defines
 * FI_EMSGSIZE, FI_EHOSTUNREACH ... as the errno values); 0 for success. */
int pfi_errno(int e)
{
	return e < 0 ? e : 0;
}

static uint64_t now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

/* ---- operations ---------------------------------------------------------------------------- */

struct pfi_op *pfi_op_new(struct pfi_ep *ep, int kind, void *context, uint64_t flags)
{
	struct pfi_op *op = calloc(1, sizeof(*op));
	(void)ep;
	if (!op)
		return NULL;
	op->kind = kind;
	op->context = context;
	op->flags = flags;
	return op;
}

static void op_append(struct pfi_ep *ep, struct pfi_op *op)
{
	op->next = NULL;
	op->prev = ep->ops_tail;
	if (ep->ops_tail)
		ep->ops_tail->next = op;
	else
		ep->ops_head = op;
	ep->ops_tail = op;
}

static void op_unlink(struct pfi_ep *ep, struct pfi_op *op)
{
	if (op->prev)
		op->prev->next = op->next;
	else
		ep->ops_head = op->next;
	if (op->next)
		op->next->prev = op->prev;
	else
		ep->ops_tail = op->prev;
	op->next = op->prev = NULL;
}

/* Free an operation not (or no longer) in the list. */
void pfi_op_drop(struct pfi_ep *ep, struct pfi_op *op)
{
	(void)ep;
	free(op->bounce);
	free(op);
}

void pfi_op_complete(struct pfi_ep *ep, struct pfi_op *op, int err, size_t olen)
{
	int recv = !!(op->flags & FI_RECV);
	struct pfi_cq *cq = recv ? ep->rx_cq : ep->tx_cq;
	struct pfi_cqe c;
	if (!cq || (!err && !op->comp))
		return;
	memset(&c, 0, sizeof(c));
	c.e.op_context = op->context;
	c.e.flags = op->flags & (FI_SEND | FI_RECV | FI_TAGGED | FI_MSG);
	c.src = FI_ADDR_NOTAVAIL;
	if (recv) {
		c.e.len = op->st.len < op->len ? op->st.len : op->len;
		c.e.buf = op->buf;
		c.e.tag = (op->flags & FI_TAGGED) ? op->st.tag : 0;
		if (op->st.flags & PN_PORT_DATA) {
			c.e.flags |= FI_REMOTE_CQ_DATA;
			c.e.data = op->st.data;
		}
		if (ep->av && op->st.src_node >= 0)
			c.src = pfi_av_reverse(ep->av, (unsigned)op->st.src_node, (unsigned)op->st.src_ctx);
	}
	c.err = err;
	c.olen = olen;
	if (pfi_cq_push(cq, &c) < 0) {
		ep->cnt->errors++;
		return;
	}
	if (err)
		ep->cnt->cq_errors++;
	else
		ep->cnt->cq_entries++;
}

/* Operation op's request has completed with rc (1 or -errno): its entry, then free it. */
static void op_finish(struct pfi_ep *ep, struct pfi_op *op, int rc)
{
	switch (op->kind) {
	case OP_SEND:
		pfi_op_complete(ep, op, rc == 1 ? 0 : -pfi_errno(rc), 0);
		break;
	case OP_INJECT:
	case OP_DISCARD:
		if (rc < 0 && rc != -EMSGSIZE)
			ep->cnt->errors++;
		break;
	case OP_RECV:
		if (rc == 1) {
			pfi_op_complete(ep, op, 0, 0);
		} else if (rc == -EMSGSIZE) {   /* truncated (PN_PORT_TRUNC): the message was consumed */
			ep->cnt->truncated++;
			pfi_op_complete(ep, op, FI_ETRUNC, op->st.len - op->len);
		} else {
			pfi_op_complete(ep, op, -pfi_errno(rc), 0);
		}
		break;
	case OP_CLAIMED:
		if (rc != 1) {
			pfi_op_complete(ep, op, -pfi_errno(rc), 0);
		} else if (op->discard) {
			op->len = 0;
			pfi_op_complete(ep, op, 0, 0);
		} else {
			size_t n = op->st.len < op->len ? op->st.len : op->len;
			if (n)
				memcpy(op->buf, op->bounce, n);
			if (op->st.len > op->len) {
				ep->cnt->truncated++;
				pfi_op_complete(ep, op, FI_ETRUNC, op->st.len - op->len);
			} else {
				pfi_op_complete(ep, op, 0, 0);
			}
		}
		break;
	}
	op_unlink(ep, op);
	pfi_op_drop(ep, op);
}

void pfi_ep_progress(struct pfi_ep *ep)
{
	if (!ep->port)
		return;
	pn_port_progress(ep->port);
	for (struct pfi_op *op = ep->ops_head, *nx; op; op = nx) {
		nx = op->next;
		if (!op->done) {
			if (pn_port_done(op->req) <= 0)
				continue;
			op->rc = pn_port_test(ep->port, &op->req, &op->st);
			op->done = 1;
		}
		if (op->kind == OP_CLAIM)   /* held until the claiming receive */
			continue;
		op_finish(ep, op, op->rc);
	}
}

/* ---- posting -------------------------------------------------------------------------------- */

int pfi_ep_dest(struct pfi_ep *ep, fi_addr_t a, unsigned *node, unsigned *ctx)
{
	if (!ep->av)
		return -FI_ENOAV;
	return pfi_av_resolve(ep->av, a, node, ctx);
}

int pfi_ep_src(struct pfi_ep *ep, fi_addr_t a, int *node, int *ctx)
{
	unsigned n, c;
	*node = *ctx = PN_PORT_ANY;
	if (a == FI_ADDR_UNSPEC || !(ep->caps & FI_DIRECTED_RECV))
		return 0;
	if (pfi_ep_dest(ep, a, &n, &c) < 0)
		return -FI_EINVAL;
	*node = (int)n;
	*ctx = (int)c;
	return 0;
}

static int completes(int selective, uint64_t flags)
{
	return !selective || (flags & FI_COMPLETION);
}

ssize_t pfi_post_send(struct pfi_ep *ep, int channel, const void *buf, size_t len, fi_addr_t dest, uint64_t tag,
		      uint64_t data, void *context, uint64_t flags, int inject)
{
	unsigned node, ctx;
	struct pfi_op *op;
	int rc;

	if (!ep->enabled)
		return -FI_EOPBADSTATE;
	if (!buf && len)
		return -FI_EINVAL;
	if (len > PN_PORT_MAX_MSG || (inject && len > PFI_INJECT_SIZE))
		return -FI_EMSGSIZE;
	if ((rc = pfi_ep_dest(ep, dest, &node, &ctx)) < 0)
		return rc;
	if (!(op = pfi_op_new(ep, inject == PFI_INJECT_CALL ? OP_INJECT : OP_SEND, context,
			      FI_SEND | (channel == PFI_CH_TAGGED ? FI_TAGGED : FI_MSG))))
		return -FI_ENOMEM;
	op->comp = inject != PFI_INJECT_CALL && completes(ep->tx_sel, flags);
	op->buf = (void *)buf;
	op->len = len;
	if (inject) {
		if (!(op->bounce = malloc(len ? len : 1))) {
			pfi_op_drop(ep, op);
			return -FI_ENOMEM;
		}
		if (len)
			memcpy(op->bounce, buf, len);
		op->buf = op->bounce;
	}
	rc = pn_port_isendx(ep->port, node, ctx, channel, tag, op->buf, len, (uint32_t)data,
			    (flags & FI_REMOTE_CQ_DATA) ? PN_PORT_DATA : 0, &op->req);
	if (rc < 0) {
		pfi_op_drop(ep, op);
		return pfi_errno(rc);
	}
	if (inject == PFI_INJECT_CALL)
		*(channel == PFI_CH_TAGGED ? &ep->cnt->tinject : &ep->cnt->inject) += 1;
	else
		*(channel == PFI_CH_TAGGED ? &ep->cnt->tsend : &ep->cnt->send) += 1;
	if (!op->comp && pn_port_done(op->req) > 0) {
		op->rc = pn_port_test(ep->port, &op->req, &op->st);
		op->done = 1;
		if (op->rc == 1) {   /* gone at once, nothing to report */
			pfi_op_drop(ep, op);
			return 0;
		}
	}
	op_append(ep, op);
	return 0;
}

ssize_t pfi_post_recv(struct pfi_ep *ep, int channel, void *buf, size_t len, fi_addr_t src, uint64_t tag,
		      uint64_t ignore, void *context, uint64_t flags)
{
	int node, ctx, rc;
	struct pfi_op *op;

	if (!ep->enabled)
		return -FI_EOPBADSTATE;
	if ((!buf && len) || (flags & FI_MULTI_RECV))
		return -FI_EINVAL;
	if ((rc = pfi_ep_src(ep, src, &node, &ctx)) < 0)
		return rc;
	if (!(op = pfi_op_new(ep, OP_RECV, context, FI_RECV | (channel == PFI_CH_TAGGED ? FI_TAGGED : FI_MSG))))
		return -FI_ENOMEM;
	op->comp = completes(ep->rx_sel, flags);
	op->buf = buf;
	op->len = len;
	rc = pn_port_irecvx(ep->port, node, ctx, channel, channel == PFI_CH_TAGGED ? tag : 0,
			    channel == PFI_CH_TAGGED ? ~ignore : 0, buf, len, PN_PORT_TRUNC, &op->req);
	if (rc < 0) {
		pfi_op_drop(ep, op);
		return pfi_errno(rc);
	}
	*(channel == PFI_CH_TAGGED ? &ep->cnt->trecv : &ep->cnt->recv) += 1;
	op_append(ep, op);
	return 0;
}

/* Used by pfi_tagged.c for FI_PEEK|FI_CLAIM / FI_DISCARD and FI_CLAIM. */
void pfi_ep_track(struct pfi_ep *ep, struct pfi_op *op)
{
	op_append(ep, op);
}

struct pfi_op *pfi_ep_find_claim(struct pfi_ep *ep, void *context)
{
	for (struct pfi_op *op = ep->ops_head; op; op = op->next)
		if (op->kind == OP_CLAIM && op->context == context)
			return op;
	return NULL;
}

/* ---- fi_ops_ep ------------------------------------------------------------------------------ */

static ssize_t ep_cancel(fid_t fid, void *context)
{
	struct pfi_ep *ep = container_of(fid, struct pfi_ep, ep.fid);
	for (struct pfi_op *op = ep->ops_head; op; op = op->next) {
		if (op->context != context || op->done || (op->kind != OP_RECV && op->kind != OP_SEND))
			continue;
		int rc = pn_port_cancel(ep->port, &op->req);
		if (rc == -EBUSY || rc == -EALREADY)
			return -FI_EBUSY;   /* matched or started: it completes normally */
		if (rc < 0)
			return pfi_errno(rc);
		ep->cnt->cancelled++;
		pfi_op_complete(ep, op, FI_ECANCELED, 0);
		op_unlink(ep, op);
		pfi_op_drop(ep, op);
		return 0;
	}
	return -FI_ENOENT;
}

static int ep_getopt(fid_t fid, int level, int optname, void *optval, size_t *optlen)
{
	(void)fid, (void)optval, (void)optlen;
	if (level != FI_OPT_ENDPOINT)
		return -FI_ENOPROTOOPT;
	(void)optname;
	return -FI_ENOPROTOOPT;
}

static int ep_setopt(fid_t fid, int level, int optname, const void *optval, size_t optlen)
{
	(void)fid, (void)optval, (void)optlen;
	if (level != FI_OPT_ENDPOINT)
		return -FI_ENOPROTOOPT;
	(void)optname;
	return -FI_ENOPROTOOPT;
}

static int ep_tx_ctx(struct fid_ep *sep, int index, struct fi_tx_attr *attr, struct fid_ep **tx_ep, void *context)
{
	(void)sep, (void)index, (void)attr, (void)tx_ep, (void)context;
	return -FI_ENOSYS;
}

static int ep_rx_ctx(struct fid_ep *sep, int index, struct fi_rx_attr *attr, struct fid_ep **rx_ep, void *context)
{
	(void)sep, (void)index, (void)attr, (void)rx_ep, (void)context;
	return -FI_ENOSYS;
}

static ssize_t ep_size_left(struct fid_ep *ep)
{
	(void)ep;
	return PFI_QUEUE_SIZE;
}

static struct fi_ops_ep ep_ops = {
	.size = sizeof(struct fi_ops_ep),
	.cancel = ep_cancel,
	.getopt = ep_getopt,
	.setopt = ep_setopt,
	.tx_ctx = ep_tx_ctx,
	.rx_ctx = ep_rx_ctx,
	.rx_size_left = ep_size_left,
	.tx_size_left = ep_size_left,
};

/* ---- fi_ops_cm: only getname (connectionless) ------------------------------------------------ */

static int ep_getname(fid_t fid, void *addr, size_t *addrlen)
{
	struct pfi_ep *ep = container_of(fid, struct pfi_ep, ep.fid);
	struct pfi_addr a = {PFI_ADDR_MAGIC, pfi_cluster_hash(), (uint16_t)ep->node, (uint16_t)ep->ctx, 0};
	if (!addrlen || (!addr && *addrlen))
		return -FI_EINVAL;
	size_t cap = *addrlen;
	*addrlen = sizeof(a);
	if (cap < sizeof(a))
		return -FI_ETOOSMALL;
	memcpy(addr, &a, sizeof(a));
	return 0;
}

static int cm_setname(fid_t fid, void *addr, size_t addrlen)
{
	(void)fid, (void)addr, (void)addrlen;
	return -FI_ENOSYS;
}

static int cm_getpeer(struct fid_ep *ep, void *addr, size_t *addrlen)
{
	(void)ep, (void)addr, (void)addrlen;
	return -FI_ENOSYS;
}

static int cm_connect(struct fid_ep *ep, const void *addr, const void *param, size_t paramlen)
{
	(void)ep, (void)addr, (void)param, (void)paramlen;
	return -FI_ENOSYS;
}

static int cm_listen(struct fid_pep *pep)
{
	(void)pep;
	return -FI_ENOSYS;
}

static int cm_accept(struct fid_ep *ep, const void *param, size_t paramlen)
{
	(void)ep, (void)param, (void)paramlen;
	return -FI_ENOSYS;
}

static int cm_reject(struct fid_pep *pep, fid_t handle, const void *param, size_t paramlen)
{
	(void)pep, (void)handle, (void)param, (void)paramlen;
	return -FI_ENOSYS;
}

static int cm_shutdown(struct fid_ep *ep, uint64_t flags)
{
	(void)ep, (void)flags;
	return -FI_ENOSYS;
}

static int cm_join(struct fid_ep *ep, const void *addr, uint64_t flags, struct fid_mc **mc, void *context)
{
	(void)ep, (void)addr, (void)flags, (void)mc, (void)context;
	return -FI_ENOSYS;
}

static struct fi_ops_cm ep_cm_ops = {
	.size = sizeof(struct fi_ops_cm),
	.setname = cm_setname,
	.getname = ep_getname,
	.getpeer = cm_getpeer,
	.connect = cm_connect,
	.listen = cm_listen,
	.accept = cm_accept,
	.reject = cm_reject,
	.shutdown = cm_shutdown,
	.join = cm_join,
};

/* ---- fi_ops: close, bind, control ------------------------------------------------------------ */

static void cq_attach(struct pfi_cq *cq, struct pfi_ep *ep)
{
	for (int i = 0; i < cq->neps; i++)
		if (cq->eps[i] == ep)
			return;
	cq->eps[cq->neps++] = ep;
	cq->refs++;
}

static void cq_detach(struct pfi_cq *cq, struct pfi_ep *ep)
{
	for (int i = 0; i < cq->neps; i++)
		if (cq->eps[i] == ep) {
			cq->eps[i] = cq->eps[--cq->neps];
			cq->refs--;
			return;
		}
}

static int ep_bind(struct fid *fid, struct fid *bfid, uint64_t flags)
{
	struct pfi_ep *ep = container_of(fid, struct pfi_ep, ep.fid);
	if (!bfid)
		return -FI_EINVAL;
	if (ep->enabled)
		return -FI_EOPBADSTATE;
	switch (bfid->fclass) {
	case FI_CLASS_AV: {
		struct pfi_av *av = container_of(bfid, struct pfi_av, av.fid);
		if (ep->av || av->dom != ep->dom)
			return -FI_EINVAL;
		ep->av = av;
		av->refs++;
		return 0;
	}
	case FI_CLASS_CQ: {
		struct pfi_cq *cq = container_of(bfid, struct pfi_cq, cq.fid);
		if (cq->dom != ep->dom || !(flags & (FI_TRANSMIT | FI_RECV)) ||
		    (flags & ~(uint64_t)(FI_TRANSMIT | FI_RECV | FI_SELECTIVE_COMPLETION)))
			return -FI_EINVAL;
		if (((flags & FI_TRANSMIT) && ep->tx_cq) || ((flags & FI_RECV) && ep->rx_cq))
			return -FI_EINVAL;
		if (cq->neps == PFI_MAX_EP_PER_CQ)
			return -FI_ENOSPC;
		if (flags & FI_TRANSMIT) {
			ep->tx_cq = cq;
			ep->tx_sel = !!(flags & FI_SELECTIVE_COMPLETION);
		}
		if (flags & FI_RECV) {
			ep->rx_cq = cq;
			ep->rx_sel = !!(flags & FI_SELECTIVE_COMPLETION);
		}
		cq_attach(cq, ep);
		return 0;
	}
	default:
		return -FI_ENOSYS;   /* no counters, event queues, stx/srx contexts */
	}
}

static int ep_control(struct fid *fid, int command, void *arg)
{
	struct pfi_ep *ep = container_of(fid, struct pfi_ep, ep.fid);
	uint64_t *fl = arg;
	switch (command) {
	case FI_ENABLE:
		if (!ep->av)
			return -FI_ENOAV;
		if (!ep->tx_cq && !ep->rx_cq)
			return -FI_ENOCQ;
		ep->enabled = 1;
		return 0;
	case FI_GETOPSFLAG:
		if (!fl)
			return -FI_EINVAL;
		if ((*fl & FI_TRANSMIT) && (*fl & FI_RECV))
			return -FI_EINVAL;
		*fl = (*fl & FI_TRANSMIT) ? ep->tx_op_flags : ep->rx_op_flags;
		return 0;
	case FI_SETOPSFLAG:
		if (!fl)
			return -FI_EINVAL;
		if (*fl & FI_TRANSMIT)
			ep->tx_op_flags = *fl & ~(uint64_t)(FI_TRANSMIT | FI_RECV);
		if (*fl & FI_RECV)
			ep->rx_op_flags = *fl & ~(uint64_t)(FI_TRANSMIT | FI_RECV);
		return 0;
	default:
		return -FI_ENOSYS;
	}
}

static int ep_close(struct fid *fid)
{
	struct pfi_ep *ep = container_of(fid, struct pfi_ep, ep.fid);
	uint64_t t0 = now_ns();
	/* Sends still in flight (injects especially: the application has forgotten them)
	 * get some time to go; receives are withdrawn. */
	for (;;) {
		int sends = 0;
		pfi_ep_progress(ep);
		for (struct pfi_op *op = ep->ops_head; op; op = op->next)
			sends += !op->done && (op->kind == OP_SEND || op->kind == OP_INJECT);
		if (!sends || now_ns() - t0 > CLOSE_DRAIN_NS)
			break;
	}
	pfi_stats_add_port(ep->cnt, ep->port);
	pn_port_close(ep->port);   /* frees the requests still pending */
	while (ep->ops_head) {     /* then their buffers (an inject's copy may be read until then) */
		struct pfi_op *op = ep->ops_head;
		op_unlink(ep, op);
		pfi_op_drop(ep, op);
	}
	if (ep->tx_cq)
		cq_detach(ep->tx_cq, ep);
	if (ep->rx_cq && ep->rx_cq != ep->tx_cq)
		cq_detach(ep->rx_cq, ep);
	if (ep->av)
		ep->av->refs--;
	ep->dom->refs--;
	free(ep);
	return 0;
}

static struct fi_ops ep_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = ep_close,
	.bind = ep_bind,
	.control = ep_control,
	.ops_open = pfi_no_ops_open,
};

int pfi_ep_open(struct fid_domain *domain, struct fi_info *info, struct fid_ep **out, void *context)
{
	struct pfi_domain *dom = container_of(domain, struct pfi_domain, d);
	struct pfi_ep *ep;
	int rc;
	if (!info || !out)
		return -FI_EINVAL;
	if (info->ep_attr && info->ep_attr->type != FI_EP_RDM && info->ep_attr->type != FI_EP_UNSPEC)
		return -FI_EINVAL;
	if (!(ep = calloc(1, sizeof(*ep))))
		return -FI_ENOMEM;
	if ((rc = pn_port_open(&ep->port, NULL)) < 0) {
		free(ep);
		return pfi_errno(rc);
	}
	ep->ep.fid.fclass = FI_CLASS_EP;
	ep->ep.fid.context = context;
	ep->ep.fid.ops = &ep_fi_ops;
	ep->ep.ops = &ep_ops;
	ep->ep.cm = &ep_cm_ops;
	ep->ep.msg = &pfi_msg_ops;
	ep->ep.tagged = &pfi_tagged_ops;
	ep->ep.rma = &pfi_no_rma_ops;
	ep->ep.atomic = &pfi_no_atomic_ops;
	ep->ep.collective = &pfi_no_coll_ops;
	ep->dom = dom;
	ep->node = pn_port_node(ep->port);
	ep->ctx = pn_port_ctx(ep->port);
	ep->caps = info->caps ? info->caps : (FI_TAGGED | FI_MSG | FI_DIRECTED_RECV);
	ep->tx_op_flags = info->tx_attr ? info->tx_attr->op_flags : 0;
	ep->rx_op_flags = info->rx_attr ? info->rx_attr->op_flags : 0;
	ep->cnt = &dom->cnt;
	ep->cnt->eps++;
	dom->node = ep->node;
	dom->refs++;
	*out = &ep->ep;
	return 0;
}
