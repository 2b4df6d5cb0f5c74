// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Hardware-independent checks and bookkeeping of paranic.ko (see pn_logic.h).
 * Every arithmetic on user-supplied numbers is done so it cannot overflow.
 */
#include "pn_logic.h"
#include "paranic/pn_protocol.h"

#define PN_U64_MAX (~(u64)0)

static int is_pow2_u64(u64 v)
{
	return v && !(v & (v - 1));
}

static u64 round_up_pow2(u64 v, u64 a)
{
	return (v + a - 1) & ~(a - 1);
}

/* ---- contexts ---- */

int pn_ctx_claim(u64 *map, u32 n_ctx, int want)
{
	u32 c;

	if (!map || n_ctx == 0 || n_ctx > PN_MAX_CONTEXTS)
		return -EINVAL;
	if (want >= 0) {
		if ((u32)want >= n_ctx)
			return -EINVAL;
		if (*map & (1ULL << want))
			return -EBUSY;
		*map |= 1ULL << want;
		return want;
	}
	for (c = 0; c < n_ctx; c++) {
		if (!(*map & (1ULL << c))) {
			*map |= 1ULL << c;
			return (int)c;
		}
	}
	return -EBUSY;
}

int pn_ctx_free(u64 *map, u32 n_ctx, u32 ctx)
{
	if (!map || n_ctx > PN_MAX_CONTEXTS || ctx >= n_ctx || !(*map & (1ULL << ctx)))
		return -EINVAL;
	*map &= ~(1ULL << ctx);
	return 0;
}

/* ---- ring geometry and mmap ---- */

int pn_geom_init(struct pn_geom *g, u32 mtu, u32 rx_log2, u32 tx_log2, u64 page_size)
{
	if (!g || mtu < 8 || mtu > PN_MAX_MTU || mtu % 8 || rx_log2 < PN_RING_LOG2_MIN ||
	    rx_log2 > PN_RING_LOG2_MAX || tx_log2 < PN_RING_LOG2_MIN || tx_log2 > PN_RING_LOG2_MAX ||
	    !is_pow2_u64(page_size) || page_size < 4096)
		return -EINVAL;
	g->mtu = mtu;
	g->rx_slots = 1u << rx_log2;
	g->rx_slot_bytes = PN_RX_SLOT_BYTES(mtu);
	g->tx_entries = 1u << tx_log2;
	/* At most 2^16 * 8256 bytes and 2^16 * 32: no overflow in 64 bits. */
	g->rx_bytes = round_up_pow2((u64)g->rx_slots * g->rx_slot_bytes, page_size);
	g->tx_bytes = round_up_pow2((u64)g->tx_entries * PN_TX_DESC_BYTES, page_size);
	g->status_bytes = page_size;
	if (g->rx_bytes > PN_RING_MAX_BYTES || g->tx_bytes > PN_RING_MAX_BYTES)
		return -EINVAL;
	return 0;
}

int pn_mmap_check(const struct pn_geom *g, u64 offset, u64 len, u64 window_bytes, int writable,
		  u64 page_size)
{
	u64 region = offset >> PARANIC_MMAP_REGION_SHIFT, size;

	if (!g || !is_pow2_u64(page_size) || offset & ((1ULL << PARANIC_MMAP_REGION_SHIFT) - 1) ||
	    len == 0 || len > PN_U64_MAX - page_size)
		return -EINVAL;
	switch (region) {
	case PN_R_CTX_PAGE:
		size = round_up_pow2(PN_CTX_PAGE_BYTES, page_size);
		break;
	case PN_R_RX:
		size = g->rx_bytes;
		break;
	case PN_R_TX:
		size = g->tx_bytes;
		break;
	case PN_R_STATUS:
		size = g->status_bytes;
		break;
	case PN_R_WINDOW:
		if (!window_bytes)
			return -ENXIO;
		size = round_up_pow2(window_bytes, page_size);
		break;
	default:
		return -EINVAL;
	}
	if (round_up_pow2(len, page_size) > size)
		return -EINVAL;
	if (writable && (region == PN_R_RX || region == PN_R_STATUS))
		return -EACCES;
	return (int)region;
}

/* ---- memory registration ---- */

int pn_mem_check(const struct paranic_mem *m, u64 used, u64 limit, u64 user_top, u64 page_size,
		 u64 *first, u64 *npages)
{
	u64 start, end;

	if (!m || !first || !npages || !is_pow2_u64(page_size) || user_top > PN_U64_MAX - page_size ||
	    m->reserved || (m->flags & ~(u32)PARANIC_MEM_ALLOC))
		return -EINVAL;
	if (m->len == 0)
		return -EINVAL;
	if (used)
		return -EBUSY;
	if (m->len > limit)
		return -E2BIG;
	*first = 0;
	*npages = round_up_pow2(m->len, page_size) / page_size;
	if (m->flags & PARANIC_MEM_ALLOC)
		return m->addr ? -EINVAL : 0;
	/* User memory: [addr, addr + len) inside the user address space, no wrap. */
	if (m->addr == 0 || m->addr >= user_top || m->len > user_top - m->addr)
		return -EFAULT;
	start = m->addr & ~(page_size - 1);
	end = round_up_pow2(m->addr + m->len, page_size); /* <= user_top, page aligned */
	*first = start;
	*npages = (end - start) / page_size;
	return 0;
}

/* ---- administrator ioctls ---- */

int pn_node_check(const struct paranic_node *n)
{
	if (!n || n->num_nodes == 0 || n->num_nodes > PN_MAX_NODES || n->node_id >= n->num_nodes ||
	    n->topo_x == 0 || n->topo_y == 0 || n->topo_x > PN_MAX_NODES || n->topo_y > PN_MAX_NODES ||
	    n->topo_x * n->topo_y != n->num_nodes)
		return -EINVAL;
	return 0;
}

int pn_routes_check(const struct paranic_routes *r, u32 table_nodes)
{
	if (!r || r->count == 0 || r->first >= table_nodes || r->count > table_nodes - r->first ||
	    !r->ports)
		return -EINVAL;
	return 0;
}

int pn_route_port_check(u8 port, u32 link_ports)
{
	if (port == PN_PORT_LOCAL || port == PN_PORT_DROP || (port >= 1 && port <= link_ports))
		return 0;
	return -EINVAL;
}

int pn_barrier_check(const struct paranic_barrier *b, u32 n_ctx)
{
	if (!b || n_ctx == 0 || n_ctx > PN_MAX_CONTEXTS || b->reserved || b->nodes == 0 ||
	    b->nodes > PN_MAX_NODES || b->radix_log2 > 3 || b->mode > 1)
		return -EINVAL;
	if (n_ctx < 64 && (b->participants >> n_ctx))
		return -EINVAL;
	return 0;
}

/* ---- semi-user-level mode ---- */

int pn_send_build(const struct paranic_send *s, u32 mtu, u64 hdr[2])
{
	u32 max = mtu;

	if (!s || !hdr || s->type >= 8 || !(PN_USER_TYPE_MASK & (1u << s->type)) ||
	    s->dst_node >= PN_MAX_NODES || s->dst_ctx >= PN_MAX_CONTEXTS)
		return -EINVAL;
	if (max > PN_PIO_WINDOW_BYTES - PN_HEADER_BYTES)
		max = PN_PIO_WINDOW_BYTES - PN_HEADER_BYTES;
	if (s->length > max)
		return -EMSGSIZE;
	hdr[0] = 0;
	hdr[1] = 0;
	PN_SET(hdr, PN_HDR_DST_NODE, s->dst_node);
	PN_SET(hdr, PN_HDR_DST_CTX, s->dst_ctx);
	PN_SET(hdr, PN_HDR_TYPE, s->type);
	PN_SET(hdr, PN_HDR_LENGTH, s->length);
	PN_SET(hdr, PN_HDR_FLAGS, PN_FLAG_SOM | PN_FLAG_EOM);
	PN_SET(hdr, PN_HDR_TAG, s->tag);
	return 0;
}

int pn_doorbell_check(const struct paranic_doorbell *d)
{
	if (!d)
		return -EINVAL;
	switch (d->reg) {
	case PN_REG_TX_TAIL:
	case PN_REG_RX_HEAD:
	case PN_REG_BARRIER:
	case PN_REG_IRQ_ARM:
		return 0;
	default:
		return -EINVAL;
	}
}

int pn_ioctl_check(unsigned int cmd)
{
	switch (cmd) {
	case PARANIC_IOC_GET_INFO:
	case PARANIC_IOC_SET_NODE_ID:
	case PARANIC_IOC_LOAD_ROUTES:
	case PARANIC_IOC_MEM_REGISTER:
	case PARANIC_IOC_MEM_DEREGISTER:
	case PARANIC_IOC_BARRIER_CONFIG:
	case PARANIC_IOC_SEND:
	case PARANIC_IOC_DOORBELL:
		return 0;
	default:
		return -ENOTTY;
	}
}
