/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The checks of the simulator's client protocol (pn_sim_proto.h): pure functions on the
 * bytes one side received from the other, shared by libparanic's sim backend and the
 * simulator's harness, fuzzed by tests/fuzz/fuzz_sim_hello.c and fuzz_sim_welcome.c.
 */
#include <errno.h>
#include <string.h>

#include "paranic/pn_protocol.h"
#include "pn_sim_proto.h"

int pn_sim_msg_kind(const void *msg, size_t n, int nfds)
{
	uint64_t magic;
	struct pn_sim_hello h;

	if (!msg || n < sizeof(magic))
		return -EPROTO;
	memcpy(&magic, msg, sizeof(magic));
	if (n == sizeof(struct pn_sim_fault) && magic == PN_SIM_MAGIC_FAULT)
		return PN_SIM_MSG_FAULT;
	if (n != sizeof(h) || nfds < 1)
		return -EPROTO;
	memcpy(&h, msg, sizeof(h));
	if (h.flags & PN_SIM_HELLO_DEVICE)
		return nfds == 2 ? PN_SIM_MSG_DEVICE : -EPROTO;
	return nfds == 1 ? PN_SIM_MSG_HELLO : -EPROTO;
}

/* [off, off + len) inside `bytes`. */
static int fits(uint64_t off, uint64_t len, uint64_t bytes)
{
	return off <= bytes && len <= bytes - off;
}

static int node_ok(const struct pn_sim_hello *h, int nodes)
{
	return h->node >= 0 && h->node < nodes && h->nodes >= 0 && h->nodes <= nodes && (!h->nodes || h->node < h->nodes);
}

int pn_sim_check_hello(const struct pn_sim_hello *h, uint64_t memfd_bytes, int nodes, int n_ctx, uint32_t mtu,
		       struct pn_sim_hello_layout *out)
{
	uint64_t slot = PN_RX_SLOT_BYTES((uint64_t)mtu), rx, tx, m;

	if (h->magic != PN_SIM_MAGIC_HELLO || h->version != PN_SIM_VERSION)
		return -EPROTO;
	if (h->flags || !node_ok(h, nodes) || h->ctx < -1 || h->ctx >= n_ctx)
		return -EINVAL;
	m = h->mem_bytes;
	rx = h->rx_log2 <= 16 ? ((uint64_t)1 << h->rx_log2) * slot : 0;
	tx = h->tx_log2 <= 16 ? ((uint64_t)PN_TX_DESC_BYTES << h->tx_log2) : 0;
	if (memfd_bytes < m || m > PN_SIM_MAX_MEM || m < 4096 || !rx || !tx || h->status_off % 64 || h->rx_off % 4096 ||
	    h->tx_off % 4096 || h->heap_off % 4096 || h->status_off < sizeof(struct pn_sim_ctl) ||
	    !fits(h->status_off, PN_STATUS_BLOCK_BYTES, m) || !fits(h->rx_off, rx, m) || !fits(h->tx_off, tx, m) ||
	    !fits(h->heap_off, h->heap_bytes, m) || h->rx_off < h->status_off + PN_STATUS_BLOCK_BYTES ||
	    h->tx_off < h->rx_off + rx || h->heap_off < h->tx_off + tx)
		return -EINVAL;
	if (out) {
		out->rx_bytes = rx;
		out->tx_bytes = tx;
		out->rx_slots = 1u << h->rx_log2;
		out->slot_bytes = (uint32_t)slot;
	}
	return 0;
}

int pn_sim_check_device_hello(const struct pn_sim_hello *h, uint64_t memfd_bytes, uint64_t ram_bytes, int nodes)
{
	if (h->magic != PN_SIM_MAGIC_HELLO || h->version != PN_SIM_VERSION)
		return -EPROTO;
	if (h->flags != PN_SIM_HELLO_DEVICE || !node_ok(h, nodes) || h->mem_bytes < 4096 || h->mem_bytes > memfd_bytes ||
	    !h->heap_bytes || h->heap_bytes > ram_bytes || h->heap_bytes > PN_SIM_MAX_MEM)
		return -EINVAL;
	return 0;
}

int pn_sim_check_ctl(const struct pn_sim_ctl *c, uint64_t end, uint32_t *qmask)
{
	uint32_t qs = c->qsize;
	if (c->magic != PN_SIM_MAGIC_CTL || !qs || (qs & (qs - 1)) || c->queue_off % 64 ||
	    c->queue_off < sizeof(struct pn_sim_ctl) || c->queue_off > end ||
	    (uint64_t)qs * sizeof(struct pn_sim_op) > end - c->queue_off)
		return -EINVAL;
	*qmask = qs - 1;
	return 0;
}

int pn_sim_check_fault(const struct pn_sim_fault *f, uint32_t cables)
{
	if (f->magic != PN_SIM_MAGIC_FAULT)
		return -EPROTO;
	if (f->version != PN_SIM_VERSION || f->cable >= cables || f->op < PN_SIM_FAULT_CUT || f->op > PN_SIM_FAULT_QUERY ||
	    (f->op == PN_SIM_FAULT_BER && f->value > 0xffffffffull))
		return -EINVAL;
	return 0;
}

/* The largest global shm a client maps (the harness's is a few KiB to a few MiB). */
#define GLOBAL_MAX (1ull << 30)

int pn_sim_check_welcome(const struct pn_sim_welcome *w, size_t n, uint32_t max_mtu)
{
	if (!w || n != sizeof(*w) || w->magic != PN_SIM_MAGIC_WELCOME || w->version != PN_SIM_VERSION)
		return -EPROTO;
	if (w->status < 0)
		return w->status >= -4095 ? w->status : -EPROTO;
	if (w->status > 0 || w->mtu < 8 || w->mtu > max_mtu || w->mtu > PN_MAX_MTU || !w->n_ctx ||
	    w->n_ctx > PN_MAX_CONTEXTS || w->ctx >= w->n_ctx || !w->sim_nodes || w->sim_nodes > PN_MAX_NODES ||
	    !w->nodes || w->nodes > w->sim_nodes || w->node >= w->nodes ||
	    w->global_bytes < sizeof(struct pn_sim_global) || w->global_bytes > GLOBAL_MAX)
		return -EPROTO;
	return 0;
}

int pn_sim_check_global(const struct pn_sim_global *g, uint64_t bytes)
{
	uint64_t recs;

	if (bytes < sizeof(*g) || g->magic != PN_SIM_MAGIC_GLOBAL || g->version != PN_SIM_VERSION)
		return -EPROTO;
	if (g->hdr_bytes < sizeof(*g) || !g->nodes || g->nodes > PN_MAX_NODES || !g->n_ctx ||
	    g->n_ctx > PN_MAX_CONTEXTS || !g->clk_hz)
		return -EPROTO;
	recs = (uint64_t)g->nodes * g->n_ctx;
	if (g->trace_off < sizeof(*g) || g->trace_off % 8 || g->trace_stride < sizeof(struct pn_sim_trace) ||
	    g->trace_stride % 8 || !fits(g->trace_off, recs * g->trace_stride, bytes))
		return -EPROTO;
	if (g->status_off && g->status_stride && g->status_period &&
	    (g->status_off < sizeof(*g) || g->status_off % 8 || g->status_stride < sizeof(struct pn_sim_node_status) ||
	     g->status_stride % 8 || !fits(g->status_off, (uint64_t)g->nodes * g->status_stride, bytes)))
		return -EPROTO;
	return 0;
}
