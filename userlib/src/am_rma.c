/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * RMA over active messages: registered regions (a key each), put and get as the
 * initiator sees them (an operation takes a window slot; its answer, RMAACK, completes
 * it), and the target side (a PUT's data copied into the region, a larger put received
 * into it after GO, a GET sent straight from it). Design of the layer: am_int.h.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "am_int.h"

/* ---- completion and the target side ------------------------------------------------------- */

/* RMA operation op is answered (err: the target's or the peer's error). */
void am_op_finish(pn_am_t *am, struct pn_rma_req *op, int err)
{
	if (err && !op->err)
		op->err = err;
	op->acked = 1;
	/* on error withdraw the data's receive/send if it has not started; one that has
	 * started ends by itself (am_reap_ops), by the ports layer's liveness at worst */
	if (err && op->data)
		pn_port_cancel(am->port, &op->data);
}

/* Operations whose answer and data are in are done; implicit ones are freed (an error
 * reported, the first one kept for pn_rma_flush). */
void am_reap_ops(pn_am_t *am)
{
	struct pn_rma_req **pp = &am->ops;
	while (*pp) {
		struct pn_rma_req *op = *pp;
		if (op->data && op->acked) {   /* before its answer it cannot be done */
			int r = pn_port_test(am->port, &op->data, NULL);
			if (r < 0 && !op->err)
				op->err = r;
		}
		if (op->acked && !op->data && !op->done) {
			op->done = 1;
			if (op->implicit) {
				if (op->err) {
					if (!am->implicit_err)
						am->implicit_err = op->err;
					report(am, op->node, op->ctx, 0, op->err, op->opid, 1);
				}
				*pp = op->next;
				free(op);
				continue;
			}
		}
		pp = &op->next;
	}
}

static struct region *region_of(pn_am_t *am, uint64_t key)
{
	for (struct region *r = am->regions; r; r = r->next)
		if (r->key == key)
			return r;
	return NULL;
}

/* Check an incoming RMA operation: 0 and the region, or -EFAULT / -EACCES. */
static int rma_check(pn_am_t *am, uint64_t key, uint64_t off, uint64_t len, unsigned need, struct region **out)
{
	struct region *r = region_of(am, key);
	if (!r)
		return -EFAULT;
	if (!(r->flags & need))
		return -EACCES;
	if (!paw_range_ok(off, len, r->len))
		return -EFAULT;
	*out = r;
	return 0;
}

/* Target side: data that has moved into or out of a region; a put's RMAACK goes when
 * its data is in. */
void am_reap_tops(pn_am_t *am)
{
	struct tgt_op **pp = &am->tops;
	while (*pp) {
		struct tgt_op *t = *pp;
		int r = 1;
		if (t->req) {
			r = pn_port_test(am->port, &t->req, NULL);
			if (r == 0) {
				pp = &t->next;
				continue;
			}
		} else {
			r = -ECONNRESET;   /* withdrawn: the initiator failed */
		}
		*pp = t->next;
		t->reg->inflight--;
		am->st.rma_inflight--;
		if (t->is_put) {
			struct peer *p = peer_of(am, t->node, t->ctx);
			p->tgt_waits--;
			if (r == 1) {
				am->st.rma_bytes_in += t->len;
				if (p->src_epoch == t->epoch)
					send_ctl(am, t->node, t->ctx, PAW_RMAACK, t->seq, 0, 0);
			}
		} else if (r == 1) {
			am->st.rma_bytes_out += t->len;
		}
		free(t);
	}
}

static int tgt_add(pn_am_t *am, struct region *reg, int is_put, unsigned node, unsigned ctx, uint32_t epoch,
		   uint32_t seq, size_t len, pn_port_req_t *req)
{
	struct tgt_op *t = malloc(sizeof(*t));
	if (!t)
		return -ENOMEM;
	*t = (struct tgt_op){.reg = reg, .req = req, .is_put = is_put, .node = node, .ctx = ctx, .epoch = epoch,
			     .seq = seq, .len = len, .next = am->tops};
	am->tops = t;
	reg->inflight++;
	am->st.rma_inflight++;
	if (is_put)
		peer_of(am, node, ctx)->tgt_waits++;
	return 0;
}

/* Target side of PUT, PUTRTS, GET. */
void am_rma_serve(pn_am_t *am, unsigned node, unsigned ctx, const struct paw_hdr *h, const uint64_t *args,
		  const uint8_t *payload)
{
	struct region *reg = NULL;
	uint64_t key = args[PAW_A_KEY], off = args[PAW_A_OFF], opid = args[PAW_A_OPID];
	uint64_t len = h->kind == PAW_PUT ? h->len : args[PAW_A_LEN];
	int err = rma_check(am, key, off, len, h->kind == PAW_GET ? PN_RMA_READ : PN_RMA_WRITE, &reg);
	pn_port_req_t *req = NULL;
	if (!err && len > PN_PORT_MAX_MSG)
		err = -EMSGSIZE;
	if (err) {
		am->st.rma_refused++;
		send_ctl(am, node, ctx, PAW_RMAACK, h->seq, err, 0);
		return;
	}
	am->st.rma_served++;
	switch (h->kind) {
	case PAW_PUT:
		if (len)
			memcpy(reg->base + off, payload, len);
		am->st.rma_bytes_in += len;
		send_ctl(am, node, ctx, PAW_RMAACK, h->seq, 0, 0);
		break;
	case PAW_PUTRTS:   /* post the receive straight into the region, then say GO */
		err = pn_port_irecv(am->port, (int)node, (int)ctx, am->rch, opid, ~0ull, reg->base + off, len, &req);
		if (!err)
			err = tgt_add(am, reg, 1, node, ctx, h->epoch, h->seq, len, req);
		if (err) {
			if (req)
				pn_port_cancel(am->port, &req);
			send_ctl(am, node, ctx, PAW_RMAACK, h->seq, err, 0);
			break;
		}
		send_ctl(am, node, ctx, PAW_GO, h->seq, 0, 0);
		break;
	case PAW_GET:   /* send straight from the region, then the answer */
		err = pn_port_isend(am->port, node, ctx, am->rch, opid, reg->base + off, len, &req);
		if (!err)
			err = tgt_add(am, reg, 0, node, ctx, h->epoch, h->seq, len, req);
		send_ctl(am, node, ctx, PAW_RMAACK, h->seq, err, 0);
		break;
	}
}

/* ---- registration and operations ---------------------------------------------------------- */

int pn_rma_register(pn_am_t *am, void *buf, size_t len, unsigned flags, uint64_t *key)
{
	struct region *r;
	long pg = sysconf(_SC_PAGESIZE);
	if (!am || !buf || !key || !len || !flags || (flags & ~(PN_RMA_READ | PN_RMA_WRITE)))
		return -EINVAL;
	/* every page must be mapped (pn_port_mem_register checks this too; but the backend may
	 * refuse in-place DMA for mapped memory, as sim does outside its DMA heap) */
	for (uintptr_t a = (uintptr_t)buf & ~(uintptr_t)(pg - 1); a < (uintptr_t)buf + len; a += (uintptr_t)pg) {
		unsigned char v;
		if (mincore((void *)a, 1, &v) != 0)
			return -EFAULT;
	}
	r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->base = buf;
	r->len = len;
	r->flags = flags;
	r->key = am->next_key++;
	r->port_reg = pn_port_mem_register(am->port, buf, len) == 0;
	r->next = am->regions;
	am->regions = r;
	*key = r->key;
	return 0;
}

int pn_rma_deregister(pn_am_t *am, uint64_t key)
{
	struct region **pp, *r;
	if (!am)
		return -EINVAL;
	if (am->depth)
		return -EDEADLK;
	for (pp = &am->regions; *pp && (*pp)->key != key; pp = &(*pp)->next)
		;
	if (!*pp)
		return -ENOENT;
	r = *pp;
	*pp = r->next;   /* out of the list: new operations on it fail with -EFAULT */
	/* (a NIC that went away finishes nothing: the region is freed all the same) */
	for (uint32_t spins = 0; r->inflight && am_alive(am, &spins) == 0;)
		pn_am_poll(am);
	if (r->port_reg)
		pn_port_mem_deregister(am->port, r->base);
	free(r);
	return 0;
}

static int rma_start(pn_am_t *am, int kind, unsigned node, unsigned ctx, uint64_t key, uint64_t offset,
		     const void *src, void *dst, size_t len, pn_rma_req_t **req)
{
	struct pn_rma_req *op;
	struct peer *p;
	uint64_t args[4];
	uint32_t seq;
	int r;
	if (!am || (len && !(kind == OP_PUT ? src : dst)))
		return -EINVAL;
	if (len > PN_PORT_MAX_MSG)
		return -EMSGSIZE;
	r = check_addr(am, node, ctx);
	if (r)
		return r;
	p = peer_of(am, node, ctx);
	r = am_slot_wait(am, p);
	if (r)
		return r;
	op = calloc(1, sizeof(*op));
	if (!op)
		return -ENOMEM;
	*op = (struct pn_rma_req){.kind = kind, .node = node, .ctx = ctx, .opid = am->next_opid++, .src = src,
				  .dst = dst, .len = len, .implicit = !req};
	r = am_slot_take(am, p, 0, op->opid, op, &seq);
	if (r) {
		free(op);
		return r;
	}
	args[PAW_A_KEY] = key;
	args[PAW_A_OFF] = offset;
	args[PAW_A_LEN] = len;
	args[PAW_A_OPID] = op->opid;
	/* inline up to what the target's posted buffer and an eager message hold */
	size_t inl = am->rcap - PAW_HDR_MAX;
	long em = pn_port_eager_max(am->port) - (long)PAW_HDR_MAX;
	if (em < 0)
		em = 0;
	if ((size_t)em < inl)
		inl = (size_t)em;
	struct paw_hdr h = {.nargs = 4, .seq = seq};
	if (kind == OP_PUT) {
		h.kind = len <= inl ? PAW_PUT : PAW_PUTRTS;
		r = am_send_msg(am, node, ctx, &h, args, src, h.kind == PAW_PUT ? len : 0);
		am->st.rma_puts++;
	} else {
		h.kind = PAW_GET;
		r = pn_port_irecv(am->port, (int)node, (int)ctx, am->rch, op->opid, ~0ull, dst, len, &op->data);
		if (!r) {
			r = am_send_msg(am, node, ctx, &h, args, NULL, 0);
			if (r)
				pn_port_cancel(am->port, &op->data);
		}
		am->st.rma_gets++;
	}
	if (r) {
		am_slot_undo(am, p, seq);
		free(op);
		return r;
	}
	op->next = am->ops;
	am->ops = op;
	if (req)
		*req = op;
	return 0;
}

int pn_rma_put(pn_am_t *am, unsigned node, unsigned ctx, uint64_t key, uint64_t offset, const void *src,
	       size_t len, pn_rma_req_t **req)
{
	return rma_start(am, OP_PUT, node, ctx, key, offset, src, NULL, len, req);
}

int pn_rma_get(pn_am_t *am, unsigned node, unsigned ctx, uint64_t key, uint64_t offset, void *dst, size_t len,
	       pn_rma_req_t **req)
{
	return rma_start(am, OP_GET, node, ctx, key, offset, NULL, dst, len, req);
}

static int op_collect(pn_am_t *am, pn_rma_req_t **req)
{
	struct pn_rma_req *op = *req, **pp;
	int r = op->err ? op->err : 1;
	for (pp = &am->ops; *pp && *pp != op; pp = &(*pp)->next)
		;
	if (*pp)
		*pp = op->next;
	free(op);
	*req = NULL;
	return r;
}

int pn_rma_test(pn_am_t *am, pn_rma_req_t **req)
{
	if (!am || !req || !*req)
		return -EINVAL;
	if (!(*req)->done && !am->depth)
		pn_am_poll(am);
	return (*req)->done ? op_collect(am, req) : 0;
}

int pn_rma_wait(pn_am_t *am, pn_rma_req_t **req, int64_t timeout_ns)
{
	uint64_t t0 = now_ns();
	if (!am || !req || !*req)
		return -EINVAL;
	if (am->depth)
		return -EDEADLK;
	uint32_t spins = 0;
	int r;
	while (!(*req)->done) {
		pn_am_poll(am);
		if (timeout_ns >= 0 && now_ns() - t0 > (uint64_t)timeout_ns && !(*req)->done)
			return -ETIMEDOUT;
		if (!(*req)->done && (r = am_alive(am, &spins)) < 0)
			return r;
	}
	return op_collect(am, req);
}

int pn_rma_flush(pn_am_t *am)
{
	int r;
	if (!am)
		return -EINVAL;
	if (am->depth)
		return -EDEADLK;
	for (uint32_t spins = 0;;) {
		int busy = 0;
		pn_am_poll(am);
		for (struct pn_rma_req *op = am->ops; op && !busy; op = op->next)
			busy = !op->done;
		if (!busy)
			break;
		if ((r = am_alive(am, &spins)) < 0)
			return r;
	}
	r = am->implicit_err;
	am->implicit_err = 0;
	return r;
}

int pn_rma_fence(pn_am_t *am)
{
	return pn_rma_flush(am);
}
