/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * libparanic HAL: the host side of ParaNIC's ring protocol, once for every backend.
 *
 * What a process does on real hardware, and nothing more: stage PIO packets in the
 * context page's window with 64-bit stores and ring PIO_DOORBELL; write 32-byte
 * descriptors into the TX ring and ring TX_TAIL; poll RX slots in host memory for
 * the valid word and return slots with RX_HEAD; read counters from the status block.
 * Backends (hal_backend.h) decide what a doorbell does and where memory lives.
 *
 * This file opens and closes a context (options, the backend table, the checks on
 * what a backend's attach hands over) and answers the queries on it (identity,
 * pn_status, pn_strerror). The rest of the protocol: hal_send.c (PIO and DMA),
 * hal_recv.c (RX slots), hal_mem.c (DMA-able memory), hal_wait.c (wait loops, time,
 * barrier); hal_util.c holds the helpers the backends use too.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hal_int.h"

/* Backends compiled into the library. */
static const struct pn_backend_ops *const pn_backends[] = {
	&pn_backend_sw,
	&pn_backend_sim,
	&pn_backend_pci,
	NULL,
};

/* ---- options from the environment ------------------------------------------------------- */

static int parse_int(const char *s, long *out)
{
	char *end;
	long v;
	if (!s || !*s)
		return -EINVAL;
	errno = 0;
	v = strtol(s, &end, 0);
	if (errno || *end)
		return -EINVAL;
	*out = v;
	return 0;
}

/* *dst stays as is when the variable is unset; -EINVAL when it is not a number. */
static int env_int(const char *name, long *dst)
{
	const char *s = getenv(name);
	if (!s || !*s)
		return 0;
	return parse_int(s, dst);
}

/* ---- open / close ------------------------------------------------------------------------ */

void pn_open_opts_init(pn_open_opts_t *o)
{
	if (!o)
		return;
	memset(o, 0, sizeof(*o));
	o->node = -1;
	o->ctx = PN_CTX_ANY;
	o->pio_threshold = -1;
}

static int resolve_opts(const pn_open_opts_t *in, pn_open_opts_t *o)
{
	long v;
	int r;

	if (in)
		*o = *in;
	else
		pn_open_opts_init(o);
	/* An option given as "" is a mistake, not "unset" (NULL is unset); an empty
	 * environment variable is unset, as usual. */
	if ((o->backend && !*o->backend) || (o->cluster && !*o->cluster))
		return -EINVAL;
	if (!o->backend)
		o->backend = getenv("PARANIC_BACKEND");
	if (!o->backend || !*o->backend)
		o->backend = "sw";
	if (!o->cluster)
		o->cluster = getenv("PARANIC_CLUSTER");
	if (!o->cluster || !*o->cluster)
		o->cluster = "default";
	/* A cluster name is 1..64 of [A-Za-z0-9_.-] for every backend (the pci backend
	 * has no use for it, but a bad option is still refused). */
	if (strlen(o->cluster) > 64 || strspn(o->cluster, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
					     "0123456789_-.") != strlen(o->cluster))
		return -EINVAL;

	if (o->node < -1)
		return -EINVAL;
	if (o->node == -1) {
		v = 0;
		if ((r = env_int("PARANIC_NODE", &v)) < 0)
			return r;
		if (v < 0 || v >= PN_MAX_NODES)
			return -EINVAL;
		o->node = (int)v;
	}
	if (o->nodes < 0)
		return -EINVAL;
	if (o->nodes == 0) {
		v = 0;
		if ((r = env_int("PARANIC_NODES", &v)) < 0)
			return r;
		if (v < 0 || v > PN_MAX_NODES)
			return -EINVAL;
		o->nodes = (int)v;
	}
	if (!in) {
		v = PN_CTX_ANY;
		if ((r = env_int("PARANIC_CTX", &v)) < 0)
			return r;
		o->ctx = (int)v;
	}
	if (o->ctx < PN_CTX_ANY || o->ctx >= PN_MAX_CONTEXTS)
		return -EINVAL;

	struct { int *field; const char *env; } shape[] = {
		{&o->contexts, "PARANIC_CONTEXTS"}, {&o->mtu, "PARANIC_MTU"},
		{&o->rx_slots, "PARANIC_RX_SLOTS"}, {&o->tx_entries, "PARANIC_TX_ENTRIES"},
	};
	for (size_t i = 0; i < sizeof(shape) / sizeof(shape[0]); i++) {
		if (*shape[i].field < 0)
			return -EINVAL;
		if (*shape[i].field == 0) {
			v = 0;
			if ((r = env_int(shape[i].env, &v)) < 0)
				return r;
			if (v < 0 || v > INT_MAX)
				return -EINVAL;
			*shape[i].field = (int)v;
		}
	}
	if (o->pio_threshold < -1)
		return -EINVAL;
	if (o->pio_threshold == -1) {
		v = PN_DEFAULT_PIO_THRESHOLD;
		if ((r = env_int("PARANIC_PIO_THRESHOLD", &v)) < 0)
			return r;
		if (v < 0)
			return -EINVAL;
		o->pio_threshold = v;
	}
	return 0;
}

static int is_pow2(uint32_t v)
{
	return v && !(v & (v - 1));
}

int pn_open(pn_hal_t **out, const pn_open_opts_t *opts)
{
	pn_open_opts_t o;
	const struct pn_backend_ops *ops = NULL;
	pn_hal_t *h;
	int r;

	if (!out)
		return -EINVAL;
	*out = NULL;
	if ((r = resolve_opts(opts, &o)) < 0)
		return r;
	for (int i = 0; pn_backends[i]; i++)
		if (!strcmp(pn_backends[i]->name, o.backend))
			ops = pn_backends[i];
	if (!ops)
		return -ENOENT;

	h = calloc(1, sizeof(*h));
	if (!h)
		return -ENOMEM;
	h->magic = PN_HAL_MAGIC;
	h->ops = ops;
	h->daemon_fd = -1;
	snprintf(h->cluster, sizeof(h->cluster), "%s", o.cluster);
	r = ops->attach(h, &o, &h->map);
	if (r < 0) {
		free(h);
		return r;
	}
	/* The common code relies on these; a backend that breaks them is a bug. */
	if (!is_pow2(h->map.rx_slots) || !is_pow2(h->map.tx_entries) || !h->map.rx_ring ||
	    !h->map.tx_ring || !h->map.status || h->map.mtu < 8 || h->map.mtu > PN_MAX_MTU ||
	    h->map.rx_slot_bytes != (uint32_t)PN_RX_SLOT_BYTES(h->map.mtu)) {
		ops->detach(h);
		free(h);
		return -EPROTO;
	}
	h->rx_mask = h->map.rx_slots - 1;
	h->tx_mask = h->map.tx_entries - 1;
	h->rx_batch = h->map.rx_slots / 16 ? h->map.rx_slots / 16 : 1;
	h->pio_max = h->map.mtu;
	if (h->pio_max > PN_PIO_WINDOW_BYTES - PN_HEADER_BYTES)
		h->pio_max = PN_PIO_WINDOW_BYTES - PN_HEADER_BYTES;
	h->pio_threshold = o.pio_threshold;
	/* Counters start where the status block stands (0 after a fresh claim). */
	h->pio_posted = sts_load(h, PN_STS_PIO_DONE_WORD);
	h->tx_tail = sts_load(h, PN_STS_TX_DONE_WORD);
	if ((r = pn_daemon_attach(h, &o)) < 0) {   /* paranicd's checks (src/daemon.c) */
		ops->detach(h);
		free(h);
		return r;
	}
	*out = h;
	return 0;
}

/* ---- closed handles ------------------------------------------------------------------------
 *
 * A freed handle cannot be checked, so pn_close does not free it at once: it poisons it
 * (magic PN_HAL_CLOSED, backend ops that all refuse with -EBADF, no regions, no backend
 * state) and parks it in a ring of the last PN_HAL_QUARANTINE closed handles; the one it
 * pushes out is freed. A handle used or closed again within the next PN_HAL_QUARANTINE
 * closes of the process returns -EBADF; after that its memory is gone, as with any freed
 * pointer. Cost: sizeof(pn_hal_t) (about 2.5 KiB) per parked handle. */

#define PN_HAL_QUARANTINE 256u

static pn_hal_t *closed_ring[PN_HAL_QUARANTINE];
static unsigned closed_next;

static int closed_refuse(void) { return -EBADF; }
static int closed_attach(pn_hal_t *h, const pn_open_opts_t *o, struct pn_hw_map *m) { (void)h; (void)o; (void)m; return closed_refuse(); }
static void closed_detach(pn_hal_t *h) { (void)h; }
static void closed_w32(pn_hal_t *h, uint32_t off, uint32_t v) { (void)h; (void)off; (void)v; }
static void closed_w64(pn_hal_t *h, uint32_t off, uint64_t v) { (void)h; (void)off; (void)v; }
static uint32_t closed_r32(pn_hal_t *h, uint32_t off) { (void)h; (void)off; return 0xffffffffu; }
static int closed_alloc(pn_hal_t *h, size_t len, void **va, uint64_t *dma) { (void)h; (void)len; (void)va; (void)dma; return closed_refuse(); }
static int closed_free(pn_hal_t *h, void *va, size_t len) { (void)h; (void)va; (void)len; return closed_refuse(); }
static int closed_reg(pn_hal_t *h, void *va, size_t len, uint64_t *dma) { (void)h; (void)va; (void)len; (void)dma; return closed_refuse(); }
static int closed_alive(pn_hal_t *h) { (void)h; return closed_refuse(); }

/* What a closed handle's calls reach when they do not check the magic themselves. */
static const struct pn_backend_ops pn_backend_closed = {
	.name = "closed",
	.attach = closed_attach,
	.detach = closed_detach,
	.mmio_write32 = closed_w32,
	.mmio_write64 = closed_w64,
	.mmio_read32 = closed_r32,
	.dma_alloc = closed_alloc,
	.dma_free = closed_free,
	.mem_register = closed_reg,
	.mem_deregister = closed_free,
	.alive = closed_alive,
};

static void park_closed(pn_hal_t *h)
{
	static const uint32_t poison_status[PN_STATUS_BLOCK_BYTES / 4];
	pn_hal_t *old;

	memset(&h->map, 0, sizeof(h->map));
	h->map.status = (volatile uint32_t *)poison_status;
	h->magic = PN_HAL_CLOSED;
	h->dead = -EBADF;
	h->ops = &pn_backend_closed;
	h->be = NULL;
	h->nregions = 0;
	h->bounce = NULL;
	h->bounce_len = 0;
	h->hook = NULL;
	h->daemon_fd = -1;
	old = __atomic_exchange_n(&closed_ring[__atomic_fetch_add(&closed_next, 1, __ATOMIC_RELAXED) %
					       PN_HAL_QUARANTINE], h, __ATOMIC_ACQ_REL);
	free(old);
}

int pn_close(pn_hal_t *h)
{
	PN_HAL_CHECK(h);
	h->magic = PN_HAL_CLOSED;   /* from here on, a second close is refused */
	for (int i = h->nregions - 1; i >= 0; i--) {
		struct pn_region *rg = &h->regions[i];
		if (rg->allocated)
			h->ops->dma_free(h, rg->va, rg->len);
		else
			h->ops->mem_deregister(h, rg->va, rg->len);
	}
	h->nregions = 0;
	pn_daemon_detach(h);
	h->ops->detach(h);
	park_closed(h);
	return 0;
}

int pn_hal_ctx_owner(pn_hal_t *h, uint32_t ctx, uint32_t *pid)
{
	PN_HAL_CHECK(h);
	if (!pid || ctx >= h->map.num_ctx)
		return -EINVAL;
	return h->ops->ctx_owner ? h->ops->ctx_owner(h, ctx, pid) : -ENOTSUP;
}

int pn_hal_ctx_release(pn_hal_t *h, uint32_t ctx, uint32_t pid)
{
	PN_HAL_CHECK(h);
	if (ctx >= h->map.num_ctx || ctx == h->map.ctx_id)
		return -EINVAL;
	return h->ops->ctx_release ? h->ops->ctx_release(h, ctx, pid) : -ENOTSUP;
}

int pn_hal_pio_free(pn_hal_t *h)
{
	return h && h->magic == PN_HAL_MAGIC && pn_hal_ready(h, PN_WAIT_PIO_WINDOW, 0);
}

int pn_node_id(const pn_hal_t *h) { PN_HAL_CHECK(h); return (int)h->map.node_id; }
int pn_num_nodes(const pn_hal_t *h) { PN_HAL_CHECK(h); return (int)h->map.num_nodes; }
int pn_ctx_id(const pn_hal_t *h) { PN_HAL_CHECK(h); return (int)h->map.ctx_id; }
int pn_num_ctx(const pn_hal_t *h) { PN_HAL_CHECK(h); return (int)h->map.num_ctx; }
int pn_mtu(const pn_hal_t *h) { PN_HAL_CHECK(h); return (int)h->map.mtu; }
int pn_pio_max(const pn_hal_t *h) { PN_HAL_CHECK(h); return (int)h->pio_max; }
const char *pn_backend_name(const pn_hal_t *h) { return h && h->magic == PN_HAL_MAGIC ? h->ops->name : "?"; }

long pn_set_pio_threshold(pn_hal_t *h, long bytes)
{
	long old;
	PN_HAL_CHECK(h);
	if (bytes < 0)
		return -EINVAL;
	old = h->pio_threshold;
	h->pio_threshold = bytes;
	return old;
}

/* ---- status ------------------------------------------------------------------------------- */

int pn_status(pn_hal_t *h, pn_status_t *st)
{
	PN_HAL_CHECK(h);
	if (!st)
		return -EINVAL;
	memset(st, 0, sizeof(*st));
	if (h->dead)
		return h->dead;
	st->pio_done = sts_load(h, PN_STS_PIO_DONE_WORD);
	st->tx_done = sts_load(h, PN_STS_TX_DONE_WORD);
	st->barrier_done = sts_load(h, PN_STS_BARRIER_DONE_WORD);
	st->errors = sts_load(h, PN_STS_ERRORS_WORD);
	st->status_reg = h->ops->mmio_read32(h, PN_REG_STATUS);
	st->rx_tail = h->ops->mmio_read32(h, PN_REG_RX_TAIL);
	/* The status register's reserved bits read 0: all-ones is a device that fell off
	 * the bus (a PCIe read of a removed device) or a simulator that went away. */
	if (st->status_reg == 0xffffffffu || h->dead) {
		int r = pn_alive(h);
		if (r == 0)
			r = h->dead = -ENODEV;
		return r;
	}
	st->rx_slots = h->map.rx_slots;
	st->rx_fill = st->rx_tail - (uint32_t)h->rx_next;
	st->tx_entries = h->map.tx_entries;
	st->tx_pending = h->tx_tail - st->tx_done;
	st->sent_packets = h->sent_packets;
	st->sent_bytes = h->sent_bytes;
	st->recv_packets = h->recv_packets;
	st->recv_bytes = h->recv_bytes;
	st->refused = h->refused;
	if (h->ops->counters)
		h->ops->counters(h, st);
	return 0;
}

/* ---- cluster status ------------------------------------------------------------------------ */

void pn_fill_fw_status(pn_node_status_t *out, const uint32_t fw[PN_FW_REGS])
{
	out->fw_state = fw[PN_FW_REG_STATE];
	out->fw_error = fw[PN_FW_REG_ERROR];
	out->topo_x = fw[PN_FW_REG_TOPO] & 0xffff;
	out->topo_y = fw[PN_FW_REG_TOPO] >> 16;
	out->coord_x = fw[PN_FW_REG_COORDS] & 0xffff;
	out->coord_y = fw[PN_FW_REG_COORDS] >> 16;
	out->epoch = fw[PN_FW_REG_EPOCH];
	out->links_in = fw[PN_FW_REG_LINKS_IN];
	out->reroutes = fw[PN_FW_REG_REROUTES];
	out->link_downs = fw[PN_FW_REG_LINK_DOWNS];
	out->evacuated = fw[PN_FW_REG_EVACUATED];
	out->lost = fw[PN_FW_REG_LOST];
	out->heartbeat = fw[PN_FW_REG_HEARTBEAT];
	out->fingerprint = fw[PN_FW_REG_FINGERPRINT];
	out->flush_timeouts = fw[PN_FW_REG_FLUSH_TIMEOUTS];
	out->phase = fw[PN_FW_REG_PHASE];
	out->flags |= PN_NODE_HAVE_FW;
}

int pn_cluster_status(pn_hal_t *h, unsigned index, pn_node_status_t *out)
{
	PN_HAL_CHECK(h);
	if (!out)
		return -EINVAL;
	if (!h->ops->node_status)
		return -ENOTSUP;
	memset(out, 0, sizeof(*out));
	out->index = index;
	return h->ops->node_status(h, index, out);
}

/* ---- errors ------------------------------------------------------------------------------- */

const char *pn_strerror(int err)
{
	if (err >= 0)
		return "success";
	switch (-err) {
	case EHOSTUNREACH: return "no such node";
	case EMSGSIZE: return "message too long for this operation or buffer";
	case EFAULT: return "buffer not in registered DMA memory";
	case EBUSY: return "context busy or cluster of another shape in use";
	case ENOENT: return "no such backend, packet or region";
	case EPROTO: return "library ABI version refused by paranicd, or a backend broke the HAL's assumptions";
	case EACCES: return "refused by paranicd (user not allowed, context not the caller's), or a segment, "
			    "socket or run directory of another user";
	case EBADMSG: return "the cluster's shared segment is corrupt (pn_sw_cluster_destroy removes it)";
	case ENOTCONN: return "no paranicd answers for this node";
	case EIO: return "the NIC went away (the simulator exited)";
	case ENODEV: return "no such device, or it fell off the bus (registers read all-ones)";
	case EBADF: return "handle closed";
	default: return strerror(-err);
	}
}
