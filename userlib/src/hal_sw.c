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
 * of a real NIC carries on after a posted write:
 *
 *   PIO_DOORBELL  validate the staged header (length, type, destination), stamp
 *                 src_node/src_ctx, deliver into the destination's RX ring, pio_done++;
 *   TX_TAIL       process descriptors: window check, cut into MTU packets with
 *                 SOM/EOM, deliver each, tx_done++ per descriptor (refused ones too);
 *   RX_HEAD       frees slots of this context's ring;
 *   BARRIER       a shared-memory barrier over the cluster's nodes, barrier_done++.
 *
 * Delivery into an RX ring (many producers): under the ring's lock, header and
 * payload are copied into the next slot, then the valid word (packet number + 1) is
 * stored with release semantics, then the ring's count. A full ring is back-pressure
 * (the packet stays pending, never dropped) unless the ring's owner is dead: then
 * the context is marked dead and packets to it are dropped and counted. The ring
 * lock holds the holder's pid, so a lock left by a killed process is taken over and
 * the half-written slot repaired. docs/userlib.md describes the design.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "hal_backend.h"

#define SW_MAGIC 0x31305753494e4150ull /* "PANISW01" */
#define SW_VERSION 1
#define SW_PAGE 4096u
#define SW_MAX_WINDOWS 64
#define SW_MAX_SEGMENT (16ull << 30)
#define SW_LIVE_CHECK_NS 2000000ull  /* look at a full ring's owner at most every 2 ms */

enum { SW_CLOSED = 0, SW_OPEN = 1, SW_DEAD = 2 };

/* Page 0 of the segment. */
struct sw_shm_hdr {
	uint64_t magic;          /* stored last (release) by the creator */
	uint32_t version;
	uint32_t creator_pid;
	uint32_t nodes, contexts, mtu, rx_slots, tx_entries, slot_bytes;
	uint64_t total_bytes;
	uint64_t node_off;       /* struct sw_node[nodes] */
	uint64_t ctx_off;        /* contexts, node-major */
	uint64_t ctx_stride;
	uint64_t meta_bytes, page_off, txr_off, rxr_off; /* within a context's area */
	uint8_t pad0[64];
	/* Barrier state, under bar_lock (holder's pid). */
	uint32_t bar_lock;
	uint32_t bar_arrived;    /* nodes entered in the current episode */
	uint32_t bar_episode;    /* episodes completed */
	uint32_t bar_merged;     /* enters of a context already waiting (count once) */
	uint64_t unroutable;     /* packets for a node id >= nodes (the router's DROP) */
};

/* One per node. */
struct sw_node {
	uint64_t bar_cur;        /* contexts of this node in the current barrier episode */
	uint64_t dropped;        /* packets for a closed or dead context of this node */
	uint8_t pad[48];
};

/* First page of a context's area; cache lines by writer. */
struct sw_ctx_meta {
	/* line 0: claim */
	uint32_t owner_pid;      /* 0 free, else the owner's pid */
	uint32_t state;          /* SW_CLOSED, SW_OPEN, SW_DEAD */
	uint32_t generation;     /* claims so far */
	uint32_t pad0;
	uint64_t dropped;        /* packets for this context dropped (closed/dead) */
	uint8_t pad1[40];
	/* line 1: producers */
	uint32_t ring_lock;      /* pid of the producer writing into the RX ring */
	uint32_t pad2;
	uint64_t rx_alloc;       /* packets written into the RX ring (= RX_TAIL) */
	uint8_t pad3[48];
	/* line 2: consumer */
	uint32_t rx_head;        /* consumer count from the RX_HEAD doorbell */
	uint32_t irq_armed;
	uint8_t pad4[56];
	/* line 3: the status block in host memory (PN_STATUS_BLOCK_BYTES) */
	uint32_t status[4];
	uint8_t pad5[48];
};

_Static_assert(sizeof(struct sw_ctx_meta) == 256, "meta layout");
_Static_assert(sizeof(struct sw_node) == 64, "node layout");

/* Per process: the mapping, this context, and the NIC engines for it. */
struct sw_be {
	uint8_t *base;
	size_t size;
	struct sw_shm_hdr *hdr;
	uint32_t pid;
	uint32_t node, ctx, nodes, contexts, mtu, rx_slots, tx_entries, slot_bytes;
	struct sw_ctx_meta *meta;
	uint8_t *page, *txr, *rxr;
	/* PIO engine */
	int pio_pending;
	uint64_t pio_hdr[2];
	uint32_t pio_done;
	/* DMA TX engine */
	uint32_t tx_tail, tx_head, tx_done;
	int cur_checked;
	uint64_t cur_desc[4];
	uint32_t cur_off;
	uint32_t errors;
	/* DMA windows (registered memory; the descriptor check) */
	struct { uint64_t base, len; } win[SW_MAX_WINDOWS];
	int nwin;
	uint64_t last_live_check;
	/* Fault injection for testing the tests ($PARANIC_SW_FAULT): drop or corrupt every
	 * n-th delivered packet, or do not stamp the source fields. */
	uint32_t fault_drop, fault_corrupt, fault_nostamp;
	uint64_t fault_count;
	/* The engines (PIO, DMA TX) and the windows they check, and the process's list of
	 * open sw contexts (see sw_progress). */
	pthread_mutex_t eng;
	struct sw_be *next;
};

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

/* ---- process liveness ------------------------------------------------------------------ */


/* ---- geometry -------------------------------------------------------------------------- */

static inline struct sw_node *sw_node(const struct sw_be *be, uint32_t n)
{
	return (struct sw_node *)(be->base + be->hdr->node_off) + n;
}

static inline uint8_t *sw_ctx_area(const struct sw_be *be, uint32_t n, uint32_t c)
{
	return be->base + be->hdr->ctx_off + ((uint64_t)n * be->contexts + c) * be->hdr->ctx_stride;
}

static inline struct sw_ctx_meta *sw_meta(const struct sw_be *be, uint32_t n, uint32_t c)
{
	return (struct sw_ctx_meta *)sw_ctx_area(be, n, c);
}

static inline uint8_t *sw_rxr(const struct sw_be *be, uint32_t n, uint32_t c)
{
	return sw_ctx_area(be, n, c) + be->hdr->rxr_off;
}

static uint64_t round_page(uint64_t v)
{
	return (v + SW_PAGE - 1) / SW_PAGE * SW_PAGE;
}

static void layout(struct sw_shm_hdr *g)
{
	g->slot_bytes = PN_RX_SLOT_BYTES(g->mtu);
	g->node_off = SW_PAGE;
	g->ctx_off = g->node_off + round_page((uint64_t)g->nodes * sizeof(struct sw_node));
	g->meta_bytes = SW_PAGE;
	g->page_off = g->meta_bytes;
	g->txr_off = g->page_off + PN_CTX_PAGE_BYTES;
	g->rxr_off = g->txr_off + round_page((uint64_t)g->tx_entries * PN_TX_DESC_BYTES);
	g->ctx_stride = g->rxr_off + round_page((uint64_t)g->rx_slots * g->slot_bytes);
	g->total_bytes = g->ctx_off + (uint64_t)g->nodes * g->contexts * g->ctx_stride;
}

static int pow2_in(int v, int lo, int hi)
{
	return v >= lo && v <= hi && !(v & (v - 1));
}

/* ---- locks with owner pid (taken over from a dead holder) ---------------------------- */

/* Returns 1 when the lock was taken over from a dead holder. */
static int sw_lock(struct sw_be *be, uint32_t *lk)
{
	struct pn_backoff b = {0};
	for (;;) {
		uint32_t cur = 0;
		if (__atomic_compare_exchange_n(lk, &cur, be->pid, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
			return 0;
		if ((b.n & 1023) == 1023 && cur && !pn_pid_alive(cur) &&
		    __atomic_compare_exchange_n(lk, &cur, be->pid, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
			return 1;
		pn_backoff_step(&b);
	}
}

static void sw_unlock(uint32_t *lk)
{
	__atomic_store_n(lk, 0, __ATOMIC_RELEASE);
}

/* A producer died while holding the ring lock: if it got as far as the valid word,
 * the packet is complete and the count must move past it; otherwise the slot is
 * simply rewritten by the next producer. */
static void ring_repair(struct sw_be *be, uint32_t n, uint32_t c)
{
	struct sw_ctx_meta *m = sw_meta(be, n, c);
	uint64_t a = m->rx_alloc;
	uint8_t *s = sw_rxr(be, n, c) + (size_t)(a & (be->rx_slots - 1)) * be->slot_bytes;
	uint64_t v = __atomic_load_n((uint64_t *)(s + be->slot_bytes - PN_RX_VALID_BYTES), __ATOMIC_ACQUIRE);
	if (v == a + 1)
		__atomic_store_n(&m->rx_alloc, a + 1, __ATOMIC_RELEASE);
}

static void ring_lock(struct sw_be *be, uint32_t n, uint32_t c)
{
	if (sw_lock(be, &sw_meta(be, n, c)->ring_lock))
		ring_repair(be, n, c);
}

/* ---- delivery ---------------------------------------------------------------------------- */

static void sw_drop(struct sw_be *be, uint32_t n, struct sw_ctx_meta *m)
{
	__atomic_fetch_add(&m->dropped, 1, __ATOMIC_RELAXED);
	__atomic_fetch_add(&sw_node(be, n)->dropped, 1, __ATOMIC_RELAXED);
}

/* The destination ring is full: back-pressure, unless its owner died. */
static int sw_full(struct sw_be *be, uint32_t n, struct sw_ctx_meta *m)
{
	uint64_t now = pn_monotonic_ns();
	uint32_t owner, st = SW_OPEN;

	if (now - be->last_live_check < SW_LIVE_CHECK_NS)
		return -EAGAIN;
	be->last_live_check = now;
	owner = __atomic_load_n(&m->owner_pid, __ATOMIC_ACQUIRE);
	if (pn_pid_alive(owner))
		return -EAGAIN;
	__atomic_compare_exchange_n(&m->state, &st, SW_DEAD, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED);
	sw_drop(be, n, m);
	return 0;
}

static inline int ring_full(const struct sw_be *be, struct sw_ctx_meta *m)
{
	uint64_t a = __atomic_load_n(&m->rx_alloc, __ATOMIC_ACQUIRE);
	uint32_t hd = __atomic_load_n(&m->rx_head, __ATOMIC_ACQUIRE);
	return (uint32_t)a - hd >= be->rx_slots;
}

/* Deliver one packet (header words already stamped). 0: delivered or dropped;
 * -EAGAIN: the destination ring is full (try again later). */
static int sw_deliver(struct sw_be *be, uint32_t n, uint32_t c, const uint64_t hw[2],
		      const uint8_t *payload, uint32_t len)
{
	struct sw_ctx_meta *m;
	uint8_t *s;
	uint64_t a;

	if (n >= be->nodes) {   /* the routing table's DROP */
		__atomic_fetch_add(&be->hdr->unroutable, 1, __ATOMIC_RELAXED);
		return 0;
	}
	if (c >= be->contexts) {   /* the destination NIC's err_unknown_ctx */
		__atomic_fetch_add(&sw_node(be, n)->dropped, 1, __ATOMIC_RELAXED);
		return 0;
	}
	m = sw_meta(be, n, c);
	if (__atomic_load_n(&m->state, __ATOMIC_ACQUIRE) != SW_OPEN) {
		sw_drop(be, n, m);
		return 0;
	}
	if (ring_full(be, m))
		return sw_full(be, n, m);
	ring_lock(be, n, c);
	if (__atomic_load_n(&m->state, __ATOMIC_ACQUIRE) != SW_OPEN) {
		sw_unlock(&m->ring_lock);
		sw_drop(be, n, m);
		return 0;
	}
	if (ring_full(be, m)) {
		sw_unlock(&m->ring_lock);
		return sw_full(be, n, m);
	}
	a = m->rx_alloc;
	s = sw_rxr(be, n, c) + (size_t)(a & (be->rx_slots - 1)) * be->slot_bytes;
	if (be->fault_drop && ++be->fault_count % be->fault_drop == 0) {
		sw_unlock(&m->ring_lock);
		return 0;
	}
	memcpy(s + PN_RX_SLOT_HEADER_OFFSET, hw, PN_HEADER_BYTES);
	if (len)
		memcpy(s + PN_RX_SLOT_PAYLOAD_OFFSET, payload, len);
	if (be->fault_corrupt && len && ++be->fault_count % be->fault_corrupt == 0)
		s[PN_RX_SLOT_PAYLOAD_OFFSET + len / 2] ^= 0x40;
	__atomic_store_n((uint64_t *)(s + be->slot_bytes - PN_RX_VALID_BYTES), a + 1, __ATOMIC_RELEASE);
	__atomic_store_n(&m->rx_alloc, a + 1, __ATOMIC_RELEASE);
	sw_unlock(&m->ring_lock);
	return 0;
}

static inline void sts_store(struct sw_be *be, unsigned word, uint32_t v)
{
	__atomic_store_n(&be->meta->status[word], v, __ATOMIC_RELEASE);
}

/* Under be->eng (the engines count errors too). */
static void count_error(struct sw_be *be)
{
	sts_store(be, PN_STS_ERRORS_WORD, ++be->errors);
}

/* Contexts may send DATA and RMA only (BARRIER is the barrier unit's, CONTROL firmware's). */
static int type_ok(uint32_t t)
{
	return t == PN_TYPE_DATA || t == PN_TYPE_RMA_PUT || t == PN_TYPE_RMA_GET || t == PN_TYPE_RMA_RESP;
}

/* ---- PIO engine --------------------------------------------------------------------------- */

static uint32_t sw_pio_max(const struct sw_be *be)
{
	uint32_t m = PN_PIO_WINDOW_BYTES - PN_HEADER_BYTES;
	return be->mtu < m ? be->mtu : m;
}

static void sw_pio_try(struct sw_be *be)
{
	uint64_t *w = be->pio_hdr;
	int r = sw_deliver(be, (uint32_t)PN_GET(w, PN_HDR_DST_NODE), (uint32_t)PN_GET(w, PN_HDR_DST_CTX), w,
			   be->page + PN_PIO_WINDOW_OFFSET + PN_HEADER_BYTES, (uint32_t)PN_GET(w, PN_HDR_LENGTH));
	if (r == -EAGAIN)
		return;
	be->pio_pending = 0;
	sts_store(be, PN_STS_PIO_DONE_WORD, ++be->pio_done);
}

static void sw_pio_doorbell_locked(struct sw_be *be)
{
	const volatile uint64_t *win = (const volatile uint64_t *)(be->page + PN_PIO_WINDOW_OFFSET);
	uint64_t *w = be->pio_hdr;

	if (be->pio_pending) {      /* PIO_BUSY: the doorbell is refused (and counted done) */
		count_error(be);
		sts_store(be, PN_STS_PIO_DONE_WORD, ++be->pio_done);
		return;
	}
	w[0] = win[0];
	w[1] = win[1];
	if (PN_GET(w, PN_HDR_LENGTH) > sw_pio_max(be) || !type_ok((uint32_t)PN_GET(w, PN_HDR_TYPE))) {
		count_error(be);
		sts_store(be, PN_STS_PIO_DONE_WORD, ++be->pio_done);
		return;
	}
	/* Stamp as the hardware does: source fields, vc and rsvd zero, only SOM/EOM kept. */
	if (!be->fault_nostamp) {
		PN_SET(w, PN_HDR_SRC_NODE, be->node);
		PN_SET(w, PN_HDR_SRC_CTX, be->ctx);
	}
	PN_SET(w, PN_HDR_VC, 0);
	w[0] &= ~(0x3full << 58);   /* rsvd (bits 63:58, no macro: reserved fields have none) */
	PN_SET(w, PN_HDR_FLAGS, PN_GET(w, PN_HDR_FLAGS) & (PN_FLAG_SOM | PN_FLAG_EOM));
	be->pio_pending = 1;
	sw_pio_try(be);
}

/* Under the engine lock: another thread's progress call may run this engine. */
static void sw_pio_doorbell(struct sw_be *be)
{
	pthread_mutex_lock(&be->eng);
	sw_pio_doorbell_locked(be);
	pthread_mutex_unlock(&be->eng);
}

/* ---- DMA TX engine ----------------------------------------------------------------------- */

static int window_ok(const struct sw_be *be, uint64_t addr, uint64_t len)
{
	if (addr + len < addr)
		return 0;
	for (int i = 0; i < be->nwin; i++)
		if (addr >= be->win[i].base && addr - be->win[i].base <= be->win[i].len &&
		    len <= be->win[i].len - (addr - be->win[i].base))
			return 1;
	return 0;
}

static void sw_tx_run(struct sw_be *be)
{
	while (be->tx_head != be->tx_tail) {
		uint64_t *d = be->cur_desc;
		uint32_t len, dn, dc, type;

		if (!be->cur_checked) {
			const volatile uint64_t *ring = (const volatile uint64_t *)
				(be->txr + (size_t)(be->tx_head & (be->tx_entries - 1)) * PN_TX_DESC_BYTES);
			for (int i = 0; i < 4; i++)
				d[i] = ring[i];
			len = (uint32_t)PN_GET(d, PN_DESC_LENGTH);
			if (len > PN_MAX_DMA_LENGTH || !type_ok((uint32_t)PN_GET(d, PN_DESC_TYPE)) ||
			    (len && !window_ok(be, PN_GET(d, PN_DESC_ADDR), len))) {
				count_error(be);
				be->tx_head++;
				sts_store(be, PN_STS_TX_DONE_WORD, ++be->tx_done);
				continue;
			}
			be->cur_checked = 1;
			be->cur_off = 0;
		}
		len = (uint32_t)PN_GET(d, PN_DESC_LENGTH);
		dn = (uint32_t)PN_GET(d, PN_DESC_DST_NODE);
		dc = (uint32_t)PN_GET(d, PN_DESC_DST_CTX);
		type = (uint32_t)PN_GET(d, PN_DESC_TYPE);
		do {
			uint32_t off = be->cur_off;
			uint32_t plen = len - off < be->mtu ? len - off : be->mtu;
			uint64_t hw[2] = {0, 0};
			PN_SET(hw, PN_HDR_DST_NODE, dn);
			PN_SET(hw, PN_HDR_SRC_NODE, be->fault_nostamp ? 0 : be->node);
			PN_SET(hw, PN_HDR_DST_CTX, dc);
			PN_SET(hw, PN_HDR_SRC_CTX, be->fault_nostamp ? 0 : be->ctx);
			PN_SET(hw, PN_HDR_TYPE, type);
			PN_SET(hw, PN_HDR_LENGTH, plen);
			PN_SET(hw, PN_HDR_FLAGS, (off == 0 ? PN_FLAG_SOM : 0) | (off + plen == len ? PN_FLAG_EOM : 0));
			PN_SET(hw, PN_HDR_TAG, PN_GET(d, PN_DESC_TAG));
			if (sw_deliver(be, dn, dc, hw, (const uint8_t *)(uintptr_t)(PN_GET(d, PN_DESC_ADDR) + off),
				       plen) == -EAGAIN)
				return;
			be->cur_off = off + plen;
		} while (be->cur_off < len);
		be->cur_checked = 0;
		be->tx_head++;
		sts_store(be, PN_STS_TX_DONE_WORD, ++be->tx_done);
	}
}

static void sw_tx_tail(struct sw_be *be, uint32_t v)
{
	pthread_mutex_lock(&be->eng);
	if (v - be->tx_head > be->tx_entries) {   /* beyond the ring: refused */
		count_error(be);
	} else {
		be->tx_tail = v;
		sw_tx_run(be);
	}
	pthread_mutex_unlock(&be->eng);
}

/* ---- barrier ------------------------------------------------------------------------------- */

static void sw_barrier_enter(struct sw_be *be)
{
	struct sw_shm_hdr *g = be->hdr;
	struct sw_node *nd = sw_node(be, be->node);
	uint64_t bit = 1ull << be->ctx;

	sw_lock(be, &g->bar_lock);
	if (!nd->bar_cur) {              /* the node enters with its first context */
		nd->bar_cur = bit;
		g->bar_arrived++;
	} else if (!(nd->bar_cur & bit)) {
		nd->bar_cur |= bit;      /* further contexts of the node ride along */
	} else {
		g->bar_merged++;         /* already waiting: counts once, one done */
	}
	if (g->bar_arrived >= g->nodes) {
		for (uint32_t n = 0; n < g->nodes; n++) {
			struct sw_node *x = sw_node(be, n);
			uint64_t mask = x->bar_cur;
			while (mask) {
				uint32_t c = (uint32_t)__builtin_ctzll(mask);
				mask &= mask - 1;
				__atomic_fetch_add(&sw_meta(be, n, c)->status[PN_STS_BARRIER_DONE_WORD], 1,
						   __ATOMIC_RELEASE);
			}
			x->bar_cur = 0;
		}
		g->bar_arrived = 0;
		g->bar_episode++;
	}
	sw_unlock(&g->bar_lock);
}

/* Take a context out of any barrier episode it is part of (close, reclaim). */
static void sw_barrier_leave(struct sw_be *be, uint32_t c)
{
	struct sw_shm_hdr *g = be->hdr;
	struct sw_node *nd = sw_node(be, be->node);
	uint64_t bit = 1ull << c;

	sw_lock(be, &g->bar_lock);
	if (nd->bar_cur & bit) {
		nd->bar_cur &= ~bit;
		if (!nd->bar_cur)
			g->bar_arrived--;
	}
	sw_unlock(&g->bar_lock);
}

/* ---- cluster segment ------------------------------------------------------------------------ */

static int shm_name(const char *cluster, char *out, size_t n)
{
	size_t len = strlen(cluster);
	if (!len || len > 64)
		return -EINVAL;
	for (size_t i = 0; i < len; i++) {
		char ch = cluster[i];
		if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
		      ch == '_' || ch == '-' || ch == '.'))
			return -EINVAL;
	}
	snprintf(out, n, "/paranic-%s", cluster);
	return 0;
}

int pn_sw_cluster_destroy(const char *cluster)
{
	char name[96];
	int r;
	if (!cluster)
		return -EINVAL;
	if ((r = shm_name(cluster, name, sizeof(name))) < 0)
		return r;
	r = shm_unlink(name) < 0 ? -errno : 0;
	{
		/* The ports' intra-node segments of the cluster ("/paranic-<cluster>:..."),
		 * left behind by killed processes. */
		size_t n = strlen(name + 1);
		DIR *d = opendir("/dev/shm");
		struct dirent *e;
		while (d && (e = readdir(d)))
			if (!strncmp(e->d_name, name + 1, n) && e->d_name[n] == ':') {
				char full[300];
				snprintf(full, sizeof(full), "/%s", e->d_name);
				shm_unlink(full);
			}
		if (d)
			closedir(d);
	}
	return r;
}

/* Any live owner of a context in the mapped cluster? */
static int cluster_in_use(struct sw_be *be)
{
	for (uint32_t n = 0; n < be->nodes; n++)
		for (uint32_t c = 0; c < be->contexts; c++) {
			uint32_t p = __atomic_load_n(&sw_meta(be, n, c)->owner_pid, __ATOMIC_ACQUIRE);
			if (p && pn_pid_alive(p))
				return 1;
		}
	return 0;
}

static void sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

static int sw_create(struct sw_be *be, int fd, const struct sw_shm_hdr *want)
{
	struct sw_shm_hdr *g;
	if (want->total_bytes > SW_MAX_SEGMENT)
		return -ENOMEM;
	if (ftruncate(fd, (off_t)want->total_bytes) < 0)
		return -errno;
	be->base = mmap(NULL, want->total_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (be->base == MAP_FAILED) {
		be->base = NULL;
		return -errno;
	}
	be->size = want->total_bytes;
	g = (struct sw_shm_hdr *)be->base;
	__atomic_store_n(&g->creator_pid, be->pid, __ATOMIC_RELEASE);   /* first: who is at work */
	g->nodes = want->nodes;
	g->contexts = want->contexts;
	g->mtu = want->mtu;
	g->rx_slots = want->rx_slots;
	g->tx_entries = want->tx_entries;
	layout(g);
	g->version = SW_VERSION;
	__atomic_store_n(&g->magic, SW_MAGIC, __ATOMIC_RELEASE);         /* last: ready */
	be->hdr = g;
	return 0;
}

/* Attach to an existing segment. 1: attached; 0: stale or other shape and unused,
 * removed (retry); <0: error. */
static int sw_attach_existing(struct sw_be *be, int fd, const char *name, const pn_open_opts_t *o,
			      const struct sw_shm_hdr *want)
{
	struct stat sb;
	struct sw_shm_hdr *g;
	int waited = 0;

	for (;;) {   /* the creator may not have sized it yet */
		if (fstat(fd, &sb) < 0)
			return -errno;
		if ((uint64_t)sb.st_size >= SW_PAGE)
			break;
		if (waited++ > 2000) {
			shm_unlink(name);
			return 0;
		}
		sleep_ms(1);
	}
	g = mmap(NULL, SW_PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (g == MAP_FAILED)
		return -errno;
	for (waited = 0; __atomic_load_n(&g->magic, __ATOMIC_ACQUIRE) != SW_MAGIC; waited++) {
		uint32_t cp = __atomic_load_n(&g->creator_pid, __ATOMIC_ACQUIRE);
		if (waited > 2000 || (cp && !pn_pid_alive(cp) && waited > 10)) {
			munmap(g, SW_PAGE);
			shm_unlink(name);
			return 0;
		}
		sleep_ms(1);
	}
	if (g->version != SW_VERSION || g->total_bytes != (uint64_t)sb.st_size) {
		munmap(g, SW_PAGE);
		shm_unlink(name);
		return 0;
	}
	be->base = mmap(NULL, g->total_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	be->size = g->total_bytes;
	munmap(g, SW_PAGE);
	if (be->base == MAP_FAILED) {
		be->base = NULL;
		return -errno;
	}
	be->hdr = g = (struct sw_shm_hdr *)be->base;
	be->nodes = g->nodes;
	be->contexts = g->contexts;
	/* A shape asked for explicitly must match; a cluster nobody uses is replaced. */
	if ((o->nodes && (uint32_t)o->nodes != g->nodes) || (o->contexts && want->contexts != g->contexts) ||
	    (o->mtu && want->mtu != g->mtu) || (o->rx_slots && want->rx_slots != g->rx_slots) ||
	    (o->tx_entries && want->tx_entries != g->tx_entries)) {
		int busy = cluster_in_use(be);
		munmap(be->base, be->size);
		be->base = NULL;
		if (busy)
			return -EBUSY;
		shm_unlink(name);
		return 0;
	}
	return 1;
}

static int sw_map_cluster(struct sw_be *be, const pn_open_opts_t *o)
{
	char name[96];
	struct sw_shm_hdr want;
	int r;

	if ((r = shm_name(o->cluster, name, sizeof(name))) < 0)
		return r;
	memset(&want, 0, sizeof(want));
	want.nodes = o->nodes ? (uint32_t)o->nodes : 1;
	want.contexts = o->contexts ? (uint32_t)o->contexts : PN_DEFAULT_CONTEXTS;
	want.mtu = o->mtu ? (uint32_t)o->mtu : PN_DEFAULT_MTU;
	want.rx_slots = o->rx_slots ? (uint32_t)o->rx_slots : PN_SW_DEFAULT_RX_SLOTS;
	want.tx_entries = o->tx_entries ? (uint32_t)o->tx_entries : PN_SW_DEFAULT_TX_ENTRIES;
	if (want.nodes > PN_MAX_NODES || want.contexts < 1 || want.contexts > PN_MAX_CONTEXTS ||
	    want.mtu < 8 || want.mtu > PN_MAX_MTU || want.mtu % 8 ||
	    !pow2_in((int)want.rx_slots, 2, 1 << 16) || !pow2_in((int)want.tx_entries, 2, 1 << 16))
		return -EINVAL;
	layout(&want);

	for (int attempt = 0; attempt < 20; attempt++) {
		int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
		if (fd >= 0) {
			r = sw_create(be, fd, &want);
			close(fd);
			if (r < 0)
				shm_unlink(name);
			return r;
		}
		if (errno != EEXIST)
			return -errno;
		fd = shm_open(name, O_RDWR, 0);
		if (fd < 0) {
			if (errno == ENOENT)
				continue;
			return -errno;
		}
		r = sw_attach_existing(be, fd, name, o, &want);
		close(fd);
		if (r != 0)
			return r < 0 ? r : 0;
	}
	return -EAGAIN;
}

/* ---- contexts ---------------------------------------------------------------------------- */

static void ctx_reset(struct sw_be *be, uint32_t c)
{
	struct sw_ctx_meta *m = sw_meta(be, be->node, c);
	uint8_t *rx = sw_rxr(be, be->node, c);

	__atomic_store_n(&m->state, SW_CLOSED, __ATOMIC_RELEASE);
	sw_barrier_leave(be, c);
	ring_lock(be, be->node, c);
	for (uint32_t i = 0; i < be->rx_slots; i++)
		__atomic_store_n((uint64_t *)(rx + (size_t)i * be->slot_bytes + be->slot_bytes - PN_RX_VALID_BYTES),
				 0, __ATOMIC_RELAXED);
	m->rx_alloc = 0;
	__atomic_store_n(&m->rx_head, 0, __ATOMIC_RELAXED);
	m->irq_armed = 0;
	memset(m->status, 0, sizeof(m->status));
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
	if ((r = sw_map_cluster(be, o)) < 0) {
		free(be);
		return r;
	}
	be->nodes = be->hdr->nodes;
	be->contexts = be->hdr->contexts;
	be->mtu = be->hdr->mtu;
	be->rx_slots = be->hdr->rx_slots;
	be->tx_entries = be->hdr->tx_entries;
	be->slot_bytes = be->hdr->slot_bytes;
	if ((uint32_t)o->node >= be->nodes || (o->ctx != PN_CTX_ANY && (uint32_t)o->ctx >= be->contexts)) {
		sw_unmap(be);
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
		sw_unmap(be);
		free(be);
		return r;
	}
	be->meta = sw_meta(be, be->node, be->ctx);
	be->page = sw_ctx_area(be, be->node, be->ctx) + be->hdr->page_off;
	be->txr = sw_ctx_area(be, be->node, be->ctx) + be->hdr->txr_off;
	be->rxr = sw_rxr(be, be->node, be->ctx);

	pthread_mutex_init(&be->eng, NULL);
	pthread_once(&sw_atfork_once, sw_atfork_register);
	pthread_mutex_lock(&sw_open_lock);
	be->next = sw_open_list;
	sw_open_list = be;
	pthread_mutex_unlock(&sw_open_lock);
	h->be = be;
	map->ctx_page = be->page;
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
	pthread_mutex_lock(&be->eng);   /* nobody runs its engines any more */
	pthread_mutex_unlock(&be->eng);
	pthread_mutex_destroy(&be->eng);
	if ((uint32_t)getpid() == be->pid) {   /* not a forked child's copy: the parent keeps it */
		__atomic_store_n(&be->meta->state, SW_CLOSED, __ATOMIC_RELEASE);
		sw_barrier_leave(be, be->ctx);
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
 * (packets to it are dropped from now on, not queued), out of the barrier, free. */
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
	sw_barrier_leave(be, c);
	__atomic_store_n(&m->owner_pid, 0, __ATOMIC_RELEASE);
	return 0;
}

/* ---- MMIO ------------------------------------------------------------------------------------ */

static void sw_mmio_write32(pn_hal_t *h, uint32_t off, uint32_t v)
{
	struct sw_be *be = h->be;
	switch (off) {
	case PN_REG_PIO_DOORBELL:
		sw_pio_doorbell(be);
		break;
	case PN_REG_TX_TAIL:
		sw_tx_tail(be, v);
		break;
	case PN_REG_RX_HEAD:
		if (v - __atomic_load_n(&be->meta->rx_head, __ATOMIC_RELAXED) <=
		    (uint32_t)__atomic_load_n(&be->meta->rx_alloc, __ATOMIC_ACQUIRE) -
		    __atomic_load_n(&be->meta->rx_head, __ATOMIC_RELAXED))
			__atomic_store_n(&be->meta->rx_head, v, __ATOMIC_RELEASE);
		else {   /* frees slots that were never filled */
			pthread_mutex_lock(&be->eng);
			count_error(be);
			pthread_mutex_unlock(&be->eng);
		}
		break;
	case PN_REG_BARRIER:
		sw_barrier_enter(be);
		break;
	case PN_REG_IRQ_ARM:
		be->meta->irq_armed = 1;   /* no interrupts in sw: receive is polled */
		break;
	default:
		if (off >= PN_PIO_WINDOW_OFFSET && off + 4 <= PN_PIO_WINDOW_OFFSET + PN_PIO_WINDOW_BYTES)
			memcpy(be->page + off, &v, 4);
		break;
	}
}

static void sw_mmio_write64(pn_hal_t *h, uint32_t off, uint64_t v)
{
	struct sw_be *be = h->be;
	if (off >= PN_PIO_WINDOW_OFFSET && off + 8 <= PN_PIO_WINDOW_OFFSET + PN_PIO_WINDOW_BYTES)
		memcpy(be->page + off, &v, 8);
	else
		sw_mmio_write32(h, off, (uint32_t)v);
}

static uint32_t sw_mmio_read32(pn_hal_t *h, uint32_t off)
{
	struct sw_be *be = h->be;
	struct sw_ctx_meta *m = be->meta;
	uint32_t v = 0;
	switch (off) {
	case PN_REG_STATUS:
		if (__atomic_load_n(&m->state, __ATOMIC_ACQUIRE) == SW_OPEN)
			v |= PN_STATUS_ENABLED;
		if (be->pio_pending)
			v |= PN_STATUS_PIO_BUSY;
		if (be->tx_head != be->tx_tail)
			v |= PN_STATUS_TX_BUSY;
		if (ring_full(be, m))
			v |= PN_STATUS_RX_FULL;
		if (m->irq_armed)
			v |= PN_STATUS_IRQ_ARMED;
		return v;
	case PN_REG_RX_TAIL:
		return (uint32_t)__atomic_load_n(&m->rx_alloc, __ATOMIC_ACQUIRE);
	case PN_REG_TX_HEAD:
		return be->tx_head;
	case PN_REG_PIO_DONE:
		return be->pio_done;
	case PN_REG_ERRORS:
		return be->errors;
	default:
		return 0;
	}
}

/* ---- memory, progress, time --------------------------------------------------------------- */

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

static void sw_engines(struct sw_be *be)
{
	if (be->pio_pending)
		sw_pio_try(be);
	if (be->tx_head != be->tx_tail)
		sw_tx_run(be);
}

static int sw_progress(pn_hal_t *h)
{
	struct sw_be *be = h->be;

	pthread_mutex_lock(&be->eng);
	sw_engines(be);
	pthread_mutex_unlock(&be->eng);
	if (pthread_mutex_trylock(&sw_open_lock) == 0) {
		for (struct sw_be *o = sw_open_list; o; o = o->next) {
			if (o == be || pthread_mutex_trylock(&o->eng) != 0)
				continue;
			sw_engines(o);
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

const struct pn_backend_ops pn_backend_sw = {
	.name = "sw",
	.attach = sw_attach,
	.detach = sw_detach,
	.mmio_write32 = sw_mmio_write32,
	.mmio_write64 = sw_mmio_write64,
	.mmio_read32 = sw_mmio_read32,
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
};
