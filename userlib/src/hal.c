/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * libparanic HAL: the host side of ParaNIC's ring protocol, once for every backend.
 *
 * What a process does on real hardware, and nothing more: stage PIO packets in the
 * context page's window with 64-bit stores and ring PIO_DOORBELL; write 32-byte
 * descriptors into the TX ring and ring TX_TAIL; poll RX slots in host memory for
 * the valid word and return slots with RX_HEAD; read counters from the status block.
 * Backends (hal_backend.h) decide what a doorbell does and where memory lives.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hal_backend.h"

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "libparanic assumes a little-endian host (the NIC's layouts are little-endian)"
#endif

/* Backends compiled into the library. */
static const struct pn_backend_ops *const pn_backends[] = {
	&pn_backend_sw,
	&pn_backend_sim,
	&pn_backend_pci,
	NULL,
};

/* A length whose top bit is set is a negative number in disguise. */
#define PN_LEN_ABSURD ((size_t)SSIZE_MAX)

/* ---- small helpers ------------------------------------------------------------------- */

uint64_t pn_monotonic_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int pn_pid_alive(uint32_t pid)
{
	char path[64], buf[256];
	FILE *f;
	char *p;

	if (!pid || pid > INT_MAX)
		return 0;
	if (kill((pid_t)pid, 0) < 0 && errno == ESRCH)
		return 0;
	snprintf(path, sizeof(path), "/proc/%u/stat", pid);
	f = fopen(path, "re");
	if (!f)
		return errno != ENOENT;   /* gone between the two looks, or /proc unreadable */
	p = fgets(buf, sizeof(buf), f);
	fclose(f);
	return !(p && (p = strrchr(buf, ')')) && p[1] == ' ' && (p[2] == 'Z' || p[2] == 'X'));
}

void pn_backoff_step(struct pn_backoff *b)
{
	uint32_t n = b->n++;
	if (n < 256) {
		pn_cpu_relax();
	} else if (n < 20000) {
		sched_yield();
	} else {
		struct timespec ts = {0, 20000};
		nanosleep(&ts, NULL);
	}
}

static inline uint32_t sts_load(const pn_hal_t *h, unsigned word)
{
	return __atomic_load_n(&h->map.status[word], __ATOMIC_ACQUIRE);
}

static inline int refuse(pn_hal_t *h, int err)
{
	h->refused++;
	return err;
}

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

int pn_close(pn_hal_t *h)
{
	if (!h)
		return -EINVAL;
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
	free(h);
	return 0;
}

int pn_hal_ctx_owner(pn_hal_t *h, uint32_t ctx, uint32_t *pid)
{
	if (!h || !pid || ctx >= h->map.num_ctx)
		return -EINVAL;
	return h->ops->ctx_owner ? h->ops->ctx_owner(h, ctx, pid) : -ENOTSUP;
}

int pn_hal_ctx_release(pn_hal_t *h, uint32_t ctx, uint32_t pid)
{
	if (!h || ctx >= h->map.num_ctx || ctx == h->map.ctx_id)
		return -EINVAL;
	return h->ops->ctx_release ? h->ops->ctx_release(h, ctx, pid) : -ENOTSUP;
}

int pn_hal_pio_free(pn_hal_t *h)
{
	return h && (int32_t)(sts_load(h, PN_STS_PIO_DONE_WORD) - h->pio_posted) >= 0;
}

int pn_node_id(const pn_hal_t *h) { return h ? (int)h->map.node_id : -EINVAL; }
int pn_num_nodes(const pn_hal_t *h) { return h ? (int)h->map.num_nodes : -EINVAL; }
int pn_ctx_id(const pn_hal_t *h) { return h ? (int)h->map.ctx_id : -EINVAL; }
int pn_num_ctx(const pn_hal_t *h) { return h ? (int)h->map.num_ctx : -EINVAL; }
int pn_mtu(const pn_hal_t *h) { return h ? (int)h->map.mtu : -EINVAL; }
int pn_pio_max(const pn_hal_t *h) { return h ? (int)h->pio_max : -EINVAL; }
const char *pn_backend_name(const pn_hal_t *h) { return h ? h->ops->name : "?"; }

long pn_set_pio_threshold(pn_hal_t *h, long bytes)
{
	long old;
	if (!h || bytes < 0)
		return -EINVAL;
	old = h->pio_threshold;
	h->pio_threshold = bytes;
	return old;
}

/* ---- waiting ------------------------------------------------------------------------------ */

static void rx_flush(pn_hal_t *h)
{
	if (h->rx_head_sent != h->rx_next) {
		h->rx_head_sent = h->rx_next;
		__atomic_thread_fence(__ATOMIC_RELEASE);
		h->ops->mmio_write32(h, PN_REG_RX_HEAD, (uint32_t)h->rx_next);
	}
}

/* One round of a wait loop: let the NIC work, let the upper layer drain, back off. */
static void wait_step(pn_hal_t *h, struct pn_backoff *b)
{
	rx_flush(h);
	if (h->ops->progress)
		h->ops->progress(h);
	if (h->hook && !h->in_hook) {
		h->in_hook = 1;
		h->hook(h, h->hook_arg);
		h->in_hook = 0;
	}
	pn_backoff_step(b);
}

int pn_progress(pn_hal_t *h)
{
	if (!h)
		return -EINVAL;
	rx_flush(h);
	return h->ops->progress ? h->ops->progress(h) : 0;
}

void pn_set_wait_hook(pn_hal_t *h, pn_wait_hook_t fn, void *arg)
{
	if (!h)
		return;
	h->hook = fn;
	h->hook_arg = arg;
}

uint64_t pn_now_ns(pn_hal_t *h)
{
	if (h && h->ops->now_ns)
		return h->ops->now_ns(h);
	return pn_monotonic_ns();
}

uint64_t pn_cycles(pn_hal_t *h)
{
	if (h && h->ops->cycles)
		return h->ops->cycles(h);
	return pn_now_ns(h) * (PN_TARGET_CLK_HZ / 1000000) / 1000;
}

/* ---- memory ------------------------------------------------------------------------------- */

static struct pn_region *region_find(const pn_hal_t *h, const void *buf, size_t len)
{
	uintptr_t a = (uintptr_t)buf;
	for (int i = 0; i < h->nregions; i++) {
		const struct pn_region *rg = &h->regions[i];
		uintptr_t b = (uintptr_t)rg->va;
		if (a >= b && a - b <= rg->len && len <= rg->len - (a - b))
			return (struct pn_region *)rg;
	}
	return NULL;
}

static int region_add(pn_hal_t *h, void *va, size_t len, uint64_t dma, int allocated)
{
	if (h->nregions >= PN_HAL_MAX_REGIONS)
		return -ENOMEM;
	h->regions[h->nregions++] = (struct pn_region){(uint8_t *)va, len, dma, allocated};
	return 0;
}

static void region_del(pn_hal_t *h, struct pn_region *rg)
{
	int i = (int)(rg - h->regions);
	memmove(&h->regions[i], &h->regions[i + 1], (size_t)(h->nregions - i - 1) * sizeof(*rg));
	h->nregions--;
}

int pn_dma_alloc(pn_hal_t *h, size_t len, void **out)
{
	void *va;
	uint64_t dma;
	int r;

	if (!h || !out || !len || len > PN_LEN_ABSURD)
		return -EINVAL;
	*out = NULL;
	if (h->nregions >= PN_HAL_MAX_REGIONS)
		return -ENOMEM;
	if ((r = h->ops->dma_alloc(h, len, &va, &dma)) < 0)
		return r;
	region_add(h, va, len, dma, 1);
	*out = va;
	return 0;
}

int pn_dma_free(pn_hal_t *h, void *buf)
{
	if (!h || !buf)
		return -EINVAL;
	for (int i = 0; i < h->nregions; i++) {
		struct pn_region *rg = &h->regions[i];
		if (rg->va == buf && rg->allocated) {
			h->ops->dma_free(h, rg->va, rg->len);
			if (h->bounce == buf) {
				h->bounce = NULL;
				h->bounce_len = 0;
			}
			region_del(h, rg);
			return 0;
		}
	}
	return -ENOENT;
}

int pn_mem_register(pn_hal_t *h, void *buf, size_t len)
{
	uint64_t dma;
	int r;

	if (!h || !buf || !len || len > PN_LEN_ABSURD)
		return -EINVAL;
	if (h->nregions >= PN_HAL_MAX_REGIONS)
		return -ENOMEM;
	if ((r = h->ops->mem_register(h, buf, len, &dma)) < 0)
		return r;
	return region_add(h, buf, len, dma, 0);
}

int pn_mem_deregister(pn_hal_t *h, void *buf)
{
	if (!h || !buf)
		return -EINVAL;
	for (int i = 0; i < h->nregions; i++) {
		struct pn_region *rg = &h->regions[i];
		if (rg->va == buf && !rg->allocated) {
			h->ops->mem_deregister(h, rg->va, rg->len);
			region_del(h, rg);
			return 0;
		}
	}
	return -ENOENT;
}

int pn_mem_is_registered(const pn_hal_t *h, const void *buf, size_t len)
{
	if (!h || !buf)
		return 0;
	return region_find(h, buf, len) != NULL;
}

int pn_mem_dma_addr(const pn_hal_t *h, const void *buf, size_t len, uint64_t *dma)
{
	const struct pn_region *rg;
	if (!h || !buf || !dma)
		return -EINVAL;
	rg = region_find(h, buf, len);
	if (!rg)
		return -EFAULT;
	*dma = rg->dma + (uint64_t)((const uint8_t *)buf - rg->va);
	return 0;
}

/* ---- status ------------------------------------------------------------------------------- */

int pn_status(pn_hal_t *h, pn_status_t *st)
{
	if (!h || !st)
		return -EINVAL;
	memset(st, 0, sizeof(*st));
	st->pio_done = sts_load(h, PN_STS_PIO_DONE_WORD);
	st->tx_done = sts_load(h, PN_STS_TX_DONE_WORD);
	st->barrier_done = sts_load(h, PN_STS_BARRIER_DONE_WORD);
	st->errors = sts_load(h, PN_STS_ERRORS_WORD);
	st->status_reg = h->ops->mmio_read32(h, PN_REG_STATUS);
	st->rx_tail = h->ops->mmio_read32(h, PN_REG_RX_TAIL);
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

/* ---- send --------------------------------------------------------------------------------- */

static int check_dst(pn_hal_t *h, unsigned dst_node, unsigned dst_ctx)
{
	if (dst_node >= h->map.num_nodes)
		return refuse(h, -EHOSTUNREACH);
	if (dst_ctx >= h->map.num_ctx)
		return refuse(h, -EINVAL);
	return 0;
}

static uint32_t packets_of(const pn_hal_t *h, size_t len)
{
	return len ? (uint32_t)((len + h->map.mtu - 1) / h->map.mtu) : 1;
}

static int pio_wait_window(pn_hal_t *h)
{
	struct pn_backoff b = {0};
	while ((int32_t)(sts_load(h, PN_STS_PIO_DONE_WORD) - h->pio_posted) < 0)
		wait_step(h, &b);
	return 0;
}

static void pio_stage_ring(pn_hal_t *h, const uint64_t hdr[2], const void *buf, size_t len)
{
	const uint8_t *p = buf;
	size_t full = len / 8, tail = len % 8;
	uint64_t v;

	if (h->map.ctx_page) {
		volatile uint64_t *w = (volatile uint64_t *)(h->map.ctx_page + PN_PIO_WINDOW_OFFSET);
		w[0] = hdr[0];
		w[1] = hdr[1];
		for (size_t i = 0; i < full; i++) {
			memcpy(&v, p + 8 * i, 8);
			w[2 + i] = v;
		}
		if (tail) {
			v = 0;
			memcpy(&v, p + 8 * full, tail);
			w[2 + full] = v;
		}
	} else {
		uint32_t off = PN_PIO_WINDOW_OFFSET;
		h->ops->mmio_write64(h, off, hdr[0]);
		h->ops->mmio_write64(h, off + 8, hdr[1]);
		for (size_t i = 0; i < full; i++) {
			memcpy(&v, p + 8 * i, 8);
			h->ops->mmio_write64(h, off + 16 + 8 * (uint32_t)i, v);
		}
		if (tail) {
			v = 0;
			memcpy(&v, p + 8 * full, tail);
			h->ops->mmio_write64(h, off + 16 + 8 * (uint32_t)full, v);
		}
	}
	pn_wmb();
	h->pio_posted++;
	h->ops->mmio_write32(h, PN_REG_PIO_DOORBELL, (uint32_t)(PN_HEADER_BYTES + len));
}

int pn_send_pio(pn_hal_t *h, unsigned dst_node, unsigned dst_ctx, uint64_t tag,
		const void *buf, size_t len)
{
	uint64_t w[2] = {0, 0};
	int r;

	if (!h)
		return -EINVAL;
	if ((r = check_dst(h, dst_node, dst_ctx)) < 0)
		return r;
	if (len > PN_LEN_ABSURD || (!buf && len))
		return refuse(h, -EINVAL);
	if (len > h->pio_max)
		return refuse(h, -EMSGSIZE);
	PN_SET(w, PN_HDR_DST_NODE, dst_node);
	PN_SET(w, PN_HDR_DST_CTX, dst_ctx);
	PN_SET(w, PN_HDR_TYPE, PN_TYPE_DATA);
	PN_SET(w, PN_HDR_LENGTH, len);
	PN_SET(w, PN_HDR_FLAGS, PN_FLAG_SOM | PN_FLAG_EOM);
	PN_SET(w, PN_HDR_TAG, tag);
	pio_wait_window(h);
	pio_stage_ring(h, w, buf, len);
	h->sent_packets++;
	h->sent_bytes += len;
	return 0;
}

int pn_pio_raw(pn_hal_t *h, const uint64_t hdr[2], const void *payload, size_t len)
{
	if (!h || !hdr || (!payload && len) || len > PN_LEN_ABSURD)
		return h ? refuse(h, -EINVAL) : -EINVAL;
	if (len > PN_PIO_WINDOW_BYTES - PN_HEADER_BYTES)
		return refuse(h, -EMSGSIZE);
	pio_wait_window(h);
	pio_stage_ring(h, hdr, payload, len);
	return 0;
}

static int tx_post(pn_hal_t *h, const uint64_t d[4])
{
	struct pn_backoff b = {0};
	volatile uint64_t *slot;

	while (h->tx_tail - sts_load(h, PN_STS_TX_DONE_WORD) >= h->map.tx_entries)
		wait_step(h, &b);
	slot = (volatile uint64_t *)(h->map.tx_ring + (size_t)(h->tx_tail & h->tx_mask) * PN_TX_DESC_BYTES);
	slot[0] = d[0];
	slot[1] = d[1];
	slot[2] = d[2];
	slot[3] = d[3];
	h->tx_tail++;
	pn_wmb();
	h->ops->mmio_write32(h, PN_REG_TX_TAIL, h->tx_tail);
	return 0;
}

int pn_tx_post_raw(pn_hal_t *h, const uint64_t desc[4])
{
	if (!h || !desc)
		return h ? refuse(h, -EINVAL) : -EINVAL;
	return tx_post(h, desc);
}

static int dma_post(pn_hal_t *h, unsigned dst_node, unsigned dst_ctx, uint64_t tag,
		    uint64_t dma, size_t len)
{
	uint64_t d[4] = {0, 0, 0, 0};
	PN_SET(d, PN_DESC_ADDR, dma);
	PN_SET(d, PN_DESC_LENGTH, len);
	PN_SET(d, PN_DESC_DST_NODE, dst_node);
	PN_SET(d, PN_DESC_DST_CTX, dst_ctx);
	PN_SET(d, PN_DESC_TYPE, PN_TYPE_DATA);
	PN_SET(d, PN_DESC_TAG, tag);
	PN_SET(d, PN_DESC_COOKIE, h->tx_tail);
	h->sent_packets += packets_of(h, len);
	h->sent_bytes += len;
	return tx_post(h, d);
}

int pn_send_dma(pn_hal_t *h, unsigned dst_node, unsigned dst_ctx, uint64_t tag,
		const void *buf, size_t len)
{
	uint64_t dma = 0;
	int r;

	if (!h)
		return -EINVAL;
	if ((r = check_dst(h, dst_node, dst_ctx)) < 0)
		return r;
	if (len > PN_LEN_ABSURD || (!buf && len))
		return refuse(h, -EINVAL);
	if (len > PN_MAX_DMA_LENGTH)
		return refuse(h, -EMSGSIZE);
	if (len && pn_mem_dma_addr(h, buf, len, &dma) < 0)
		return refuse(h, -EFAULT);
	return dma_post(h, dst_node, dst_ctx, tag, dma, len);
}

int pn_send(pn_hal_t *h, unsigned dst_node, unsigned dst_ctx, uint64_t tag,
	    const void *buf, size_t len)
{
	int r;

	if (!h)
		return -EINVAL;
	if ((r = check_dst(h, dst_node, dst_ctx)) < 0)
		return r;
	if (len > PN_LEN_ABSURD || (!buf && len))
		return refuse(h, -EINVAL);
	if ((long)len <= h->pio_threshold && len <= h->pio_max)
		return pn_send_pio(h, dst_node, dst_ctx, tag, buf, len);
	if (len > PN_MAX_DMA_LENGTH)
		return refuse(h, -EMSGSIZE);
	if (pn_mem_is_registered(h, buf, len))
		return pn_send_dma(h, dst_node, dst_ctx, tag, buf, len);

	/* Bounce: wait until its previous use completed, grow it if needed, copy, post. */
	if ((r = pn_tx_wait_until(h, h->bounce_ticket)) < 0)
		return r;
	if (h->bounce_len < len) {
		size_t want = 64 * 1024;
		void *nb;
		while (want < len)
			want <<= 1;
		if (h->bounce)
			pn_dma_free(h, h->bounce);
		h->bounce = NULL;
		h->bounce_len = 0;
		if ((r = pn_dma_alloc(h, want, &nb)) < 0)
			return refuse(h, r);
		h->bounce = nb;
		h->bounce_len = want;
	}
	memcpy(h->bounce, buf, len);
	r = pn_send_dma(h, dst_node, dst_ctx, tag, h->bounce, len);
	h->bounce_ticket = h->tx_tail;
	return r;
}

uint32_t pn_tx_posted(const pn_hal_t *h)
{
	return h ? h->tx_tail : 0;
}

int pn_tx_wait_until(pn_hal_t *h, uint32_t count)
{
	struct pn_backoff b = {0};
	if (!h)
		return -EINVAL;
	if ((int32_t)(count - h->tx_tail) > 0)
		return refuse(h, -EINVAL);
	while ((int32_t)(sts_load(h, PN_STS_TX_DONE_WORD) - count) < 0)
		wait_step(h, &b);
	return 0;
}

int pn_tx_wait(pn_hal_t *h)
{
	int r;
	if (!h)
		return -EINVAL;
	if ((r = pn_tx_wait_until(h, h->tx_tail)) < 0)
		return r;
	return pio_wait_window(h);
}

/* ---- receive ------------------------------------------------------------------------------ */

static inline volatile uint8_t *rx_slot(const pn_hal_t *h, uint64_t n)
{
	return h->map.rx_ring + (size_t)(n & h->rx_mask) * h->map.rx_slot_bytes;
}

static int rx_poll(pn_hal_t *h)
{
	volatile uint8_t *s = rx_slot(h, h->rx_next);
	uint64_t v = __atomic_load_n((volatile uint64_t *)(s + h->map.rx_slot_bytes - PN_RX_VALID_BYTES),
				     __ATOMIC_ACQUIRE);
	uint64_t w[2];

	/* The valid word holds the packet's number + 1; compare the low 32 bits so that a
	 * NIC keeping a 32-bit count works as well as one keeping 64 bits. */
	if ((uint32_t)v != (uint32_t)(h->rx_next + 1))
		return 0;
	w[0] = ((volatile uint64_t *)s)[0];
	w[1] = ((volatile uint64_t *)s)[1];
	h->cur.dst_node = (uint16_t)PN_GET(w, PN_HDR_DST_NODE);
	h->cur.src_node = (uint16_t)PN_GET(w, PN_HDR_SRC_NODE);
	h->cur.dst_ctx = (uint8_t)PN_GET(w, PN_HDR_DST_CTX);
	h->cur.src_ctx = (uint8_t)PN_GET(w, PN_HDR_SRC_CTX);
	h->cur.type = (uint8_t)PN_GET(w, PN_HDR_TYPE);
	h->cur.flags = (uint8_t)PN_GET(w, PN_HDR_FLAGS);
	h->cur.length = (uint32_t)PN_GET(w, PN_HDR_LENGTH);
	h->cur.tag = PN_GET(w, PN_HDR_TAG);
	/* Never trust a length beyond the slot (a broken NIC must not make us overrun). */
	if (h->cur.length > h->map.mtu)
		h->cur.length = h->map.mtu;
	h->cur_slot = s;
	h->cur_valid = 1;
	return 1;
}

int pn_recv_header(pn_hal_t *h, pn_header_t *hdr)
{
	if (!h || !hdr)
		return -EINVAL;
	if (!h->cur_valid && !rx_poll(h)) {
		/* Nothing there: let a software NIC work, return freed slots, look again. */
		rx_flush(h);
		if (h->ops->progress)
			h->ops->progress(h);
		if (!rx_poll(h))
			return 0;
	}
	*hdr = h->cur;
	return 1;
}

static void rx_release(pn_hal_t *h)
{
	h->cur_valid = 0;
	h->rx_next++;
	h->recv_packets++;
	h->recv_bytes += h->cur.length;
	if (h->rx_next - h->rx_head_sent >= h->rx_batch)
		rx_flush(h);
}

int pn_recv_body(pn_hal_t *h, void *buf, size_t len)
{
	uint32_t n;
	if (!h)
		return -EINVAL;
	if (!h->cur_valid)
		return -ENOENT;
	n = h->cur.length;
	if (len < n)
		return -EMSGSIZE;
	if (!buf && n)
		return -EINVAL;
	if (n)
		memcpy(buf, (const void *)(uintptr_t)(h->cur_slot + PN_RX_SLOT_PAYLOAD_OFFSET), n);
	rx_release(h);
	return (int)n;
}

int pn_recv_skip(pn_hal_t *h)
{
	uint32_t n;
	if (!h)
		return -EINVAL;
	if (!h->cur_valid)
		return -ENOENT;
	n = h->cur.length;
	rx_release(h);
	return (int)n;
}

int pn_recv_payload(pn_hal_t *h, const void **payload)
{
	if (!h || !payload)
		return -EINVAL;
	if (!h->cur_valid)
		return -ENOENT;
	*payload = (const void *)(uintptr_t)(h->cur_slot + PN_RX_SLOT_PAYLOAD_OFFSET);
	return (int)h->cur.length;
}

int pn_recv_wait(pn_hal_t *h, pn_header_t *hdr, int64_t timeout_ns)
{
	struct pn_backoff b = {0};
	uint64_t t0 = 0;
	int r;

	if (!h || !hdr)
		return -EINVAL;
	for (;;) {
		if ((r = pn_recv_header(h, hdr)) != 0)
			return r;
		if (timeout_ns >= 0) {
			uint64_t now = pn_monotonic_ns();
			if (!t0)
				t0 = now;
			else if (now - t0 >= (uint64_t)timeout_ns)
				return 0;
		}
		if (h->hook && !h->in_hook) {
			h->in_hook = 1;
			h->hook(h, h->hook_arg);
			h->in_hook = 0;
		}
		pn_backoff_step(&b);
	}
}

/* ---- barrier ------------------------------------------------------------------------------ */

int pn_barrier(pn_hal_t *h)
{
	struct pn_backoff b = {0};
	uint32_t b0;

	if (!h)
		return -EINVAL;
	b0 = sts_load(h, PN_STS_BARRIER_DONE_WORD);
	rx_flush(h);
	pn_wmb();
	h->ops->mmio_write32(h, PN_REG_BARRIER, 1);
	while (sts_load(h, PN_STS_BARRIER_DONE_WORD) == b0)
		wait_step(h, &b);
	return 0;
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
	case EACCES: return "refused by paranicd: user not allowed or context not the caller's";
	case ENOTCONN: return "no paranicd answers for this node";
	default: return strerror(-err);
	}
}
