/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The backend interface of libparanic's HAL.
 *
 * A backend presents one hardware context of a ParaNIC exactly as the hardware's
 * host interface does (docs/protocol.md): a 4 KiB context page (doorbells, PIO
 * window), an RX ring of slots, a TX descriptor ring and a status block in host
 * memory, byte-compatible with the gateware. The common code (hal.c, hal_send.c,
 * hal_recv.c, hal_mem.c, hal_wait.c) writes descriptors, PIO windows and doorbells
 * and polls RX slots and the status block as a process does on real hardware;
 * backends differ only in what a doorbell does and where memory lives:
 *
 *   sw   the "NIC" runs inline in the calling processes, over POSIX shared memory
 *        (hal_sw.c, hal_sw_nic.c, hal_sw_shm.c);
 *   sim  the Verilator cluster simulator serves doorbells and DMA (hal_sim.c);
 *   pci  the driver's mmap of a board's context page and DMA rings (hal_pci.c).
 *
 * To add a backend: define a `const struct pn_backend_ops` and list it in
 * pn_backends[] in hal.c.
 */
#ifndef PN_HAL_BACKEND_H
#define PN_HAL_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "paranic/pn_hal.h"

/* What attach hands the common code: the context as the hardware lays it out. */
struct pn_hw_map {
	/* The context's 4 KiB MMIO page (or its emulation). The common code writes the
	 * PIO window through it with 64-bit stores; NULL means "window stores go through
	 * ops->mmio_write64" (a backend that must see every store). */
	volatile uint8_t *ctx_page;
	/* RX ring: rx_slots slots of rx_slot_bytes (= PN_RX_SLOT_BYTES(mtu)). */
	volatile uint8_t *rx_ring;
	uint32_t rx_slots;       /* power of two */
	uint32_t rx_slot_bytes;
	/* TX descriptor ring: tx_entries descriptors of PN_TX_DESC_BYTES. */
	volatile uint8_t *tx_ring;
	uint32_t tx_entries;     /* power of two */
	/* The status block (PN_STATUS_BLOCK_BYTES, four 32-bit counters). */
	volatile uint32_t *status;
	/* Identity and shape. */
	uint32_t mtu;
	uint32_t node_id, num_nodes;
	uint32_t ctx_id, num_ctx;
};

struct pn_backend_ops {
	const char *name;
	/* Claim a context as opts asks (opts fully resolved by hal.c: backend, cluster,
	 * node, nodes, ctx filled in; shape fields 0 = default), set h->be to the
	 * backend's private state and fill *map. Returns 0 or -errno. */
	int (*attach)(pn_hal_t *h, const pn_open_opts_t *opts, struct pn_hw_map *map);
	/* Release the context and everything attach set up. */
	void (*detach)(pn_hal_t *h);
	/* A store into the context page at byte offset `off` (a doorbell, or a PIO window
	 * word when map.ctx_page is NULL). Doorbells: PN_REG_PIO_DOORBELL (value: bytes
	 * staged, header included), PN_REG_TX_TAIL (new producer count), PN_REG_RX_HEAD
	 * (consumer count), PN_REG_BARRIER, PN_REG_IRQ_ARM. */
	void (*mmio_write32)(pn_hal_t *h, uint32_t off, uint32_t value);
	/* A 64-bit store: a PIO window word, or PN_REG_PIO_SEND (header word 0 stored into
	 * window word 0, then the doorbell: the store+doorbell). */
	void (*mmio_write64)(pn_hal_t *h, uint32_t off, uint64_t value);
	/* Optional, for a backend without ctx_page: the staging of one PIO packet but its
	 * header word 0 (hdr[1] and the payload, a zero-padded last word) in one call; it
	 * must mean exactly the same as the 64-bit window stores it stands for. The HAL
	 * then stores hdr[0] through PN_REG_PIO_SEND (mmio_write64), the store+doorbell. */
	void (*pio_stage)(pn_hal_t *h, const uint64_t hdr[2], const void *buf, size_t len);
	/* A load from the context page (PN_REG_STATUS, RX_TAIL, TX_HEAD, PIO_DONE, ERRORS). */
	uint32_t (*mmio_read32)(pn_hal_t *h, uint32_t off);
	/* DMA-able memory: allocate (zeroed) / free, or register caller memory; both give
	 * the DMA address the NIC uses for the first byte. */
	int (*dma_alloc)(pn_hal_t *h, size_t len, void **va, uint64_t *dma);
	int (*dma_free)(pn_hal_t *h, void *va, size_t len);
	int (*mem_register)(pn_hal_t *h, void *va, size_t len, uint64_t *dma);
	int (*mem_deregister)(pn_hal_t *h, void *va, size_t len);
	/* Do pending NIC work without blocking (NULL when the hardware works alone).
	 * Called by every HAL poll and wait loop. Returns 0 or -errno. */
	int (*progress)(pn_hal_t *h);
	/* Time base: ns and target-clock cycles (simulated time for sim). */
	uint64_t (*now_ns)(pn_hal_t *h);
	uint64_t (*cycles)(pn_hal_t *h);
	/* Optional (NULL: the wall clock): the clock of the library's own deadlines, in ns
	 * (pn_deadline_ns). */
	uint64_t (*deadline_ns)(pn_hal_t *h);
	/* Optional: fill backend counters of pn_status_t (node_dropped ...). */
	void (*counters)(pn_hal_t *h, pn_status_t *st);
	/* Optional, for paranicd (NULL: not known / done by the backend itself): the pid
	 * owning context ctx of h's node (0: free); release context ctx of h's node if pid
	 * still owns it (a crashed process: closed, out of barriers, free to claim). */
	int (*ctx_owner)(pn_hal_t *h, uint32_t ctx, uint32_t *pid);
	int (*ctx_release)(pn_hal_t *h, uint32_t ctx, uint32_t pid);
	/* Optional (NULL: -ENOTSUP): pn_cluster_status() of node `index`; *out is zeroed and
	 * its index set by the caller. */
	int (*node_status)(pn_hal_t *h, unsigned index, pn_node_status_t *out);
	/* Optional (NULL: the NIC cannot go away, as for sw): 0 while the NIC answers,
	 * else -EIO (the simulator went away) or -ENODEV (the device fell off the bus).
	 * Called every PN_ALIVE_EVERY rounds of a wait loop, so it may cost a system call
	 * or an MMIO read, not more. Once it failed it must keep failing. */
	int (*alive)(pn_hal_t *h);
};

/* Fill out's fw_* fields from the fw_* registers in FW_STATUS order (PN_FW_REG_*). */
void pn_fill_fw_status(pn_node_status_t *out, const uint32_t fw[PN_FW_REGS]);

extern const struct pn_backend_ops pn_backend_sw;
extern const struct pn_backend_ops pn_backend_sim;
extern const struct pn_backend_ops pn_backend_pci;

/* A registered region or DMA buffer, as the common code tracks them. */
struct pn_region {
	uint8_t *va;
	size_t len;
	uint64_t dma;
	int allocated;   /* from dma_alloc (freed by pn_dma_free / pn_close) */
};

#define PN_HAL_MAX_REGIONS 64

/* pn_hal.magic of an open handle, and of a closed one (hal.c: pn_close keeps a closed
 * handle's memory, poisoned, for the next PN_HAL_QUARANTINE closes). */
#define PN_HAL_MAGIC 0x4148504eu        /* "PNHA" */
#define PN_HAL_CLOSED 0x444c4f43u       /* "COLD" */

struct pn_hal {
	uint32_t magic;                 /* PN_HAL_MAGIC while open */
	int dead;                       /* 0, or -EIO/-ENODEV once the NIC went away */
	const struct pn_backend_ops *ops;
	void *be;                       /* backend private state */
	struct pn_hw_map map;
	uint32_t pio_max;
	long pio_threshold;

	/* Receive side. */
	uint64_t rx_next;               /* packets consumed (absolute) */
	uint64_t rx_head_sent;          /* last value written to RX_HEAD */
	uint32_t rx_batch;              /* RX_HEAD written every rx_batch releases */
	uint32_t rx_mask;
	int cur_valid;                  /* a header was returned, body not yet consumed */
	pn_header_t cur;
	volatile uint8_t *cur_slot;

	/* Send side. */
	uint32_t pio_posted;            /* PIO doorbells rung */
	uint32_t tx_tail;               /* descriptors posted */
	uint32_t tx_mask;
	void *bounce;                   /* pn_send's bounce buffer (DMA-able) */
	size_t bounce_len;
	uint32_t bounce_ticket;         /* descriptor count after its last use */

	/* Registered memory. */
	struct pn_region regions[PN_HAL_MAX_REGIONS];
	int nregions;

	/* Wait hook. */
	pn_wait_hook_t hook;
	void *hook_arg;
	int in_hook;

	/* Software counters. */
	uint64_t sent_packets, sent_bytes, recv_packets, recv_bytes, refused;
	uint64_t rx_refused;            /* broken RX records skipped (length beyond the MTU, bad type) */

	/* The connection to the node's paranicd (-1: none), open for the context's life. */
	int daemon_fd;
	/* The cluster (job) this context belongs to, as resolved at open: upper layers
	 * name node-local resources after it (ports' intra-node shared memory). */
	char cluster[72];
};

/* ---- paranicd (src/daemon.c) ------------------------------------------------------------ */

/* Called by pn_open after attach: announce the context to the node's daemon if one
 * runs ($PARANIC_DAEMON: auto, require, off). 0, or -EACCES/-EPROTO (refused),
 * -ENOTCONN (required and none). Sets h->daemon_fd. */
int pn_daemon_attach(pn_hal_t *h, const pn_open_opts_t *o);
/* Called by pn_close before detach: DETACH and close the connection. */
void pn_daemon_detach(pn_hal_t *h);
/* For paranicd: the backend calls above (-ENOTSUP when the backend has none). */
int pn_hal_ctx_owner(pn_hal_t *h, uint32_t ctx, uint32_t *pid);
int pn_hal_ctx_release(pn_hal_t *h, uint32_t ctx, uint32_t pid);
/* For paranicd: 1 when the PIO window is free (a pn_send_pio would not wait). */
int pn_hal_pio_free(pn_hal_t *h);

/* ---- helpers shared by the common code and the backends (hal_util.c) ------------------- */

/* Polite polling: spin, then yield, then sleep a little (the machine may have fewer
 * cores than polling processes). */
struct pn_backoff {
	uint32_t n;
};
void pn_backoff_step(struct pn_backoff *b);
static inline void pn_backoff_reset(struct pn_backoff *b) { b->n = 0; }

/* Wait loops ask the backend whether the NIC is still there once every this many
 * rounds (pn_alive): about every 10 us while spinning, every few ms while sleeping. */
#define PN_ALIVE_EVERY 256u

/* For the wait loops of the layers above the HAL: 0, or the error of a NIC that went
 * away (pn_alive), asked every PN_ALIVE_EVERY calls (*spins counts them). */
static inline int pn_wait_alive(pn_hal_t *h, uint32_t *spins)
{
	if (++*spins % PN_ALIVE_EVERY)
		return h->dead;
	return pn_alive(h);
}

uint64_t pn_monotonic_ns(void);

/* The clock of the library's own deadlines (liveness, connect, a send that stopped
 * moving), in ns: the wall clock, but on the sim backend the simulator's work clock,
 * which stands still while the simulator waits for a CPU or for a client to look, so a
 * loaded machine does not turn a slow cluster into a dead one (docs/userlib.md,
 * "Deadlines"). A time limit the caller passes (pn_rd_recv_timeout ...) is wall time. */
uint64_t pn_deadline_ns(pn_hal_t *h);

/* 0 when the process pid is gone or a zombie (killed, not yet reaped), or pid is 0;
 * 1 otherwise. Used wherever a context, ring, lock or
 * port directory entry names its owner by pid. */
int pn_pid_alive(uint32_t pid);

static inline void pn_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield" ::: "memory");
#endif
}

/* Order stores to host memory / the write-combined PIO window before a doorbell. */
static inline void pn_wmb(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_sfence();
#endif
	__atomic_thread_fence(__ATOMIC_RELEASE);
}

#endif /* PN_HAL_BACKEND_H */
