/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Private to the `sw` backend (hal_sw.c: the backend's ops and contexts; hal_sw_nic.c:
 * the NIC model; hal_sw_shm.c: the cluster's shared-memory segment): the segment's
 * layout, the per-process state and what the three files call of each other.
 */
#ifndef PN_HAL_SW_H
#define PN_HAL_SW_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

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
	/* The layout, copied from the header once it was validated (hal_sw_shm.c): the
	 * geometry below never reads the shared header again, which another process could
	 * change under us. */
	uint64_t node_off, ctx_off, ctx_stride, page_off, txr_off, rxr_off;
	int created;             /* this process created the segment (removed on a failed open) */
	uint64_t shm_ino;        /* ... and its inode */
	uint32_t pid;
	uint32_t node, ctx, nodes, contexts, mtu, rx_slots, tx_entries, slot_bytes;
	struct sw_ctx_meta *meta;
	uint8_t *page, *txr, *rxr;
	/* PIO engine (the gateware's rule, hw/host_pio.py: only words staged since the last
	 * PIO packet ended leave; a window write while a packet is pending spoils the next) */
	int pio_pending;
	uint64_t pio_hdr[2];
	uint32_t pio_done;
	uint32_t pio_staged;     /* one past the highest 64-bit window word written */
	int pio_spoiled;         /* a window write was refused since the last doorbell */
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
	 * open sw contexts (see sw_progress in hal_sw.c). */
	pthread_mutex_t eng;
	struct sw_be *next;
};

/* ---- geometry -------------------------------------------------------------------------- */

static inline struct sw_node *sw_node(const struct sw_be *be, uint32_t n)
{
	return (struct sw_node *)(be->base + be->node_off) + n;
}

static inline uint8_t *sw_ctx_area(const struct sw_be *be, uint32_t n, uint32_t c)
{
	return be->base + be->ctx_off + ((uint64_t)n * be->contexts + c) * be->ctx_stride;
}

static inline struct sw_ctx_meta *sw_meta(const struct sw_be *be, uint32_t n, uint32_t c)
{
	return (struct sw_ctx_meta *)sw_ctx_area(be, n, c);
}

static inline uint8_t *sw_rxr(const struct sw_be *be, uint32_t n, uint32_t c)
{
	return sw_ctx_area(be, n, c) + be->rxr_off;
}

/* Internal to libparanic: no PLT indirection, not exported. */
#pragma GCC visibility push(hidden)

/* ---- the NIC model (hal_sw_nic.c) ----------------------------------------------------------- */

/* Take the RX ring lock of context c of node n (taken over, and the ring repaired, when
 * its holder died); release it with sw_unlock(&sw_meta(be, n, c)->ring_lock). */
void pn_sw_ring_lock(struct sw_be *be, uint32_t n, uint32_t c);
static inline void sw_unlock(uint32_t *lk)
{
	__atomic_store_n(lk, 0, __ATOMIC_RELEASE);
}

/* Take context c of this node out of any barrier episode it is part of (close, reclaim). */
void pn_sw_barrier_leave(struct sw_be *be, uint32_t c);
/* The engines of a context (hal_sw_nic.c): send its pending PIO packet; send what its
 * posted descriptors describe. Under be->eng. */
void pn_sw_pio_try(struct sw_be *be);
void pn_sw_tx_run(struct sw_be *be);
/* Run this context's engines when they have work; under be->eng. Inline: every progress
 * call of every open context makes these two tests, which mostly find nothing. */
static inline void pn_sw_engines(struct sw_be *be)
{
	if (be->pio_pending)
		pn_sw_pio_try(be);
	if (be->tx_head != be->tx_tail)
		pn_sw_tx_run(be);
}
/* The context page's registers (struct pn_backend_ops mmio_write32/64, mmio_read32). */
void pn_sw_mmio_write32(pn_hal_t *h, uint32_t off, uint32_t v);
void pn_sw_mmio_write64(pn_hal_t *h, uint32_t off, uint64_t v);
void pn_sw_pio_stage(pn_hal_t *h, const uint64_t hdr[2], const void *buf, size_t len);
uint32_t pn_sw_mmio_read32(pn_hal_t *h, uint32_t off);

/* ---- the cluster segment (hal_sw_shm.c) ---------------------------------------------------- */

/* Create or attach /dev/shm/paranic-<cluster> of the shape o asks (be->base, size, hdr,
 * the shape and the layout set, be->created when this call created it). 0 or -errno
 * (-EBUSY: in use with another shape; -EACCES: owned by another user or open to others;
 * -EBADMSG: a header whose layout does not hold). */
int pn_sw_map_cluster(struct sw_be *be, const pn_open_opts_t *o);
/* Unmap; the segment goes too when this process created it and nobody else uses it
 * (a pn_open that failed after creating leaves nothing behind). */
void pn_sw_unmap_cluster(struct sw_be *be, const char *cluster);

#pragma GCC visibility pop

#endif /* PN_HAL_SW_H */
