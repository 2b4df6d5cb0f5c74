/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The `sw` backend: a software ParaNIC for processes on one machine.
 *
 * A behavioural model of NicCore's host interface in POSIX shared memory
 * (/dev/shm/paranic-<cluster>). Every (node, context) has the hardware's layouts:
 * a 4 KiB context page (PIO window), a TX descriptor ring, an RX ring of slots and
 * a status block. The "NIC" is the sender: a doorbell does the NIC's work inline in
 * the process that rings it, and work that cannot finish (the destination ring is
 * full) stays pending and is resumed by the HAL's progress calls, as the DMA engine
 * of a real NIC carries on after a posted write. docs/userlib.md describes the design.
 *
 *   hal_sw.c      the backend: claiming and releasing contexts, attach/detach, the
 *                 DMA windows (registered memory), progress over the process's
 *                 contexts, time, paranicd's owner and clean-up calls;
 *   hal_sw_nic.c  the NIC model: doorbells, delivery into RX rings, the PIO and DMA
 *                 TX engines, the barrier;
 *   hal_sw_shm.c  the cluster's shared-memory segment: layout, create, attach, destroy;
 *   hal_sw.h      the layout and state the three share.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "hal_sw.h"

/* Every sw context open in this process. A real NIC's engines run on their own; the
 * software NIC runs in its callers, so a process waiting on one context (a barrier on
 * context 1, say) also runs the engines of its other contexts, whose posted DMA would
 * otherwise stall until the process next touched them (and a peer waiting for that
 * data would wait for ever). Other threads' contexts are only tried (trylock). */
static pthread_mutex_t sw_open_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sw_be *sw_open_list;
static pthread_once_t sw_atfork_once = PTHREAD_ONCE_INIT;

/* A child of fork inherits the list but not the contexts: the parent still owns them
 * and runs their engines, so the child must not run copies of them (it would move the
 * parent's descriptors a second time). Its own pn_open calls start a new list. */
static void sw_atfork_child(void)
{
	pthread_mutex_init(&sw_open_lock, NULL);
	sw_open_list = NULL;
}

static void sw_atfork_register(void)
{
	pthread_atfork(NULL, NULL, sw_atfork_child);
}

/* ---- contexts ---------------------------------------------------------------------------- */

/* Hand-over of context c to a new owner (the claim holds owner_pid): everything of it
 * that the new owner can read is zeroed, as the driver's OPEN sequence zeroes the PIO
 * buffer and gives fresh rings: the context page (PIO window), the TX ring, the whole RX
 * ring (headers and payloads, not only the valid words), the status block and the
 * per-context drop count. Producers see the context closed (they drop, not write) and
 * the ring lock keeps one that is mid-packet out until the ring is clean. */
static void ctx_reset(struct sw_be *be, uint32_t c)
{
	struct sw_ctx_meta *m = sw_meta(be, be->node, c);
	uint8_t *area = sw_ctx_area(be, be->node, c);

	__atomic_store_n(&m->state, SW_CLOSED, __ATOMIC_RELEASE);
	pn_sw_barrier_leave(be, c);
	pn_sw_ring_lock(be, be->node, c);
	memset(area + be->page_off, 0, PN_CTX_PAGE_BYTES);
	memset(area + be->txr_off, 0, (size_t)be->tx_entries * PN_TX_DESC_BYTES);
	memset(area + be->rxr_off, 0, (size_t)be->rx_slots * be->slot_bytes);
	m->rx_alloc = 0;
	__atomic_store_n(&m->rx_head, 0, __ATOMIC_RELAXED);
	m->irq_armed = 0;
	memset(m->status, 0, sizeof(m->status));
	__atomic_store_n(&m->dropped, 0, __ATOMIC_RELAXED);
	m->generation++;
	sw_unlock(&m->ring_lock);
}

/* Claim context c of this node: free, or owned by a dead process. */
static int ctx_claim(struct sw_be *be, uint32_t c, int reclaim)
{
	struct sw_ctx_meta *m = sw_meta(be, be->node, c);
	uint32_t cur = 0;

	if (!__atomic_compare_exchange_n(&m->owner_pid, &cur, be->pid, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
		if (!reclaim || cur == be->pid || pn_pid_alive(cur))
			return -EBUSY;
		if (!__atomic_compare_exchange_n(&m->owner_pid, &cur, be->pid, 0, __ATOMIC_ACQ_REL,
						 __ATOMIC_ACQUIRE))
			return -EBUSY;
	}
	ctx_reset(be, c);
	__atomic_store_n(&m->state, SW_OPEN, __ATOMIC_RELEASE);
	return 0;
}

static void sw_unmap(struct sw_be *be)
{
	if (be->base)
		munmap(be->base, be->size);
	be->base = NULL;
}

static int sw_attach(pn_hal_t *h, const pn_open_opts_t *o, struct pn_hw_map *map)
{
	struct sw_be *be = calloc(1, sizeof(*be));
	int r = -EBUSY;

	if (!be)
		return -ENOMEM;
	be->pid = (uint32_t)getpid();
	{
		const char *f = getenv("PARANIC_SW_FAULT");
		if (f && !strncmp(f, "drop=", 5))
			be->fault_drop = (uint32_t)strtoul(f + 5, NULL, 0);
		else if (f && !strncmp(f, "corrupt=", 8))
			be->fault_corrupt = (uint32_t)strtoul(f + 8, NULL, 0);
		else if (f && !strcmp(f, "nostamp"))
			be->fault_nostamp = 1;
	}
	if ((r = pn_sw_map_cluster(be, o)) < 0) {
		free(be);
		return r;
	}
	/* The shape (be->nodes ...) and layout come from the checked header (hal_sw_shm.c). */
	if ((uint32_t)o->node >= be->nodes || (o->ctx != PN_CTX_ANY && (uint32_t)o->ctx >= be->contexts)) {
		pn_sw_unmap_cluster(be, o->cluster);   /* a segment this open made goes again */
		free(be);
		return -EINVAL;
	}
	be->node = (uint32_t)o->node;
	if (o->ctx != PN_CTX_ANY) {
		be->ctx = (uint32_t)o->ctx;
		r = ctx_claim(be, be->ctx, 1);
	} else {
		/* Any free context, context 0 (rawdata's well-known one) last; then dead ones. */
		r = -EBUSY;
		for (int pass = 0; pass < 2 && r < 0; pass++)
			for (uint32_t i = 1; i <= be->contexts && r < 0; i++) {
				be->ctx = i % be->contexts;
				r = ctx_claim(be, be->ctx, pass);
			}
	}
	if (r < 0) {
		pn_sw_unmap_cluster(be, o->cluster);
		free(be);
		return r;
	}
	be->created = 0;   /* from now on the cluster's: pn_sw_cluster_destroy removes it */
	be->meta = sw_meta(be, be->node, be->ctx);
	be->page = sw_ctx_area(be, be->node, be->ctx) + be->page_off;
	be->txr = sw_ctx_area(be, be->node, be->ctx) + be->txr_off;
	be->rxr = sw_rxr(be, be->node, be->ctx);

	pthread_mutex_init(&be->eng, NULL);
	pthread_once(&sw_atfork_once, sw_atfork_register);
	pthread_mutex_lock(&sw_open_lock);
	be->next = sw_open_list;
	sw_open_list = be;
	pthread_mutex_unlock(&sw_open_lock);
	h->be = be;
	map->ctx_page = NULL;   /* every window store goes through the NIC model (what is staged) */
	map->rx_ring = be->rxr;
	map->rx_slots = be->rx_slots;
	map->rx_slot_bytes = be->slot_bytes;
	map->tx_ring = be->txr;
	map->tx_entries = be->tx_entries;
	map->status = be->meta->status;
	map->mtu = be->mtu;
	map->node_id = be->node;
	map->num_nodes = be->nodes;
	map->ctx_id = be->ctx;
	map->num_ctx = be->contexts;
	return 0;
}

static void sw_detach(pn_hal_t *h)
{
	struct sw_be *be = h->be;
	if (!be)
		return;
	pthread_mutex_lock(&sw_open_lock);
	for (struct sw_be **pp = &sw_open_list; *pp; pp = &(*pp)->next)
		if (*pp == be) {
			*pp = be->next;
			break;
		}
	pthread_mutex_unlock(&sw_open_lock);
	pthread_mutex_lock(&be->eng);   /* wait out another thread's progress call on it */
	pthread_mutex_unlock(&be->eng);
	pthread_mutex_destroy(&be->eng);
	if ((uint32_t)getpid() == be->pid) {   /* not a forked child's copy: the parent keeps it */
		__atomic_store_n(&be->meta->state, SW_CLOSED, __ATOMIC_RELEASE);
		pn_sw_barrier_leave(be, be->ctx);
		__atomic_store_n(&be->meta->owner_pid, 0, __ATOMIC_RELEASE);
	}
	sw_unmap(be);
	free(be);
	h->be = NULL;
}

/* ---- paranicd: owners and crash clean-up (contexts of the caller's node) ---------------------- */

static int sw_ctx_owner(pn_hal_t *h, uint32_t c, uint32_t *pid)
{
	struct sw_be *be = h->be;
	*pid = __atomic_load_n(&sw_meta(be, be->node, c)->owner_pid, __ATOMIC_ACQUIRE);
	return 0;
}

/* What sw_detach does for its own context, done by the daemon for a dead owner: closed
 * (packets to it are dropped, not queued), out of the barrier, free. */
static int sw_ctx_release(pn_hal_t *h, uint32_t c, uint32_t pid)
{
	struct sw_be *be = h->be;
	struct sw_ctx_meta *m = sw_meta(be, be->node, c);
	uint32_t cur = pid;

	if (!pid || __atomic_load_n(&m->owner_pid, __ATOMIC_ACQUIRE) != pid)
		return -ESRCH;   /* already released or claimed again */
	if (!__atomic_compare_exchange_n(&m->owner_pid, &cur, be->pid, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
		return -ESRCH;
	__atomic_store_n(&m->state, SW_CLOSED, __ATOMIC_RELEASE);
	pn_sw_barrier_leave(be, c);
	__atomic_store_n(&m->owner_pid, 0, __ATOMIC_RELEASE);
	return 0;
}

/* ---- memory, progress, time, ops --------------------------------------------------------------- */

static int win_add(struct sw_be *be, void *va, size_t len)
{
	int r = 0;

	pthread_mutex_lock(&be->eng);
	if (be->nwin >= SW_MAX_WINDOWS) {
		r = -ENOMEM;
	} else {
		be->win[be->nwin].base = (uint64_t)(uintptr_t)va;
		be->win[be->nwin].len = len;
		be->nwin++;
	}
	pthread_mutex_unlock(&be->eng);
	return r;
}

static void win_del(struct sw_be *be, void *va)
{
	pthread_mutex_lock(&be->eng);
	for (int i = 0; i < be->nwin; i++)
		if (be->win[i].base == (uint64_t)(uintptr_t)va) {
			be->win[i] = be->win[--be->nwin];
			break;
		}
	pthread_mutex_unlock(&be->eng);
}

/* The sw NIC reads the sender's memory directly: DMA addresses are virtual addresses. */
static int sw_mem_register(pn_hal_t *h, void *va, size_t len, uint64_t *dma)
{
	int r = win_add(h->be, va, len);
	if (r == 0)
		*dma = (uint64_t)(uintptr_t)va;
	return r;
}

static int sw_mem_deregister(pn_hal_t *h, void *va, size_t len)
{
	(void)len;
	win_del(h->be, va);
	return 0;
}

static int sw_dma_alloc(pn_hal_t *h, size_t len, void **va, uint64_t *dma)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	int r;
	if (p == MAP_FAILED)
		return -ENOMEM;
	if ((r = sw_mem_register(h, p, len, dma)) < 0) {
		munmap(p, len);
		return r;
	}
	*va = p;
	return 0;
}

static int sw_dma_free(pn_hal_t *h, void *va, size_t len)
{
	win_del(h->be, va);
	munmap(va, len);
	return 0;
}

static int sw_progress(pn_hal_t *h)
{
	struct sw_be *be = h->be;

	pthread_mutex_lock(&be->eng);
	pn_sw_engines(be);
	pthread_mutex_unlock(&be->eng);
	if (pthread_mutex_trylock(&sw_open_lock) == 0) {
		for (struct sw_be *o = sw_open_list; o; o = o->next) {
			if (o == be || pthread_mutex_trylock(&o->eng) != 0)
				continue;
			pn_sw_engines(o);
			pthread_mutex_unlock(&o->eng);
		}
		pthread_mutex_unlock(&sw_open_lock);
	}
	return 0;
}

static uint64_t sw_now_ns(pn_hal_t *h)
{
	(void)h;
	return pn_monotonic_ns();
}

static uint64_t sw_cycles(pn_hal_t *h)
{
	return sw_now_ns(h) * (PN_TARGET_CLK_HZ / 1000000) / 1000;
}

static void sw_counters(pn_hal_t *h, pn_status_t *st)
{
	struct sw_be *be = h->be;
	st->node_dropped = __atomic_load_n(&sw_node(be, be->node)->dropped, __ATOMIC_RELAXED);
}

/* pn_cluster_status: the sw NIC is a crossbar in shared memory, with no firmware and no
 * links; node ids are the node indices. */
static int sw_node_status(pn_hal_t *h, unsigned index, pn_node_status_t *out)
{
	struct sw_be *be = h->be;
	if (index >= be->nodes)
		return -ENOENT;
	out->node_id = index;
	out->fw_state = PN_FW_STATE_NONE;
	out->n_links = 0;
	return 0;
}

const struct pn_backend_ops pn_backend_sw = {
	.name = "sw",
	.attach = sw_attach,
	.detach = sw_detach,
	.mmio_write32 = pn_sw_mmio_write32,
	.mmio_write64 = pn_sw_mmio_write64,
	.pio_stage = pn_sw_pio_stage,
	.mmio_read32 = pn_sw_mmio_read32,
	.dma_alloc = sw_dma_alloc,
	.dma_free = sw_dma_free,
	.mem_register = sw_mem_register,
	.mem_deregister = sw_mem_deregister,
	.progress = sw_progress,
	.now_ns = sw_now_ns,
	.cycles = sw_cycles,
	.counters = sw_counters,
	.ctx_owner = sw_ctx_owner,
	.ctx_release = sw_ctx_release,
	.node_status = sw_node_status,
};
