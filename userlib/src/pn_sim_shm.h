/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The protocol between libparanic's `sim` backend (hal_sim.c) and the Verilator
 * cluster simulator's harness (sim/): socket messages and shared-memory layouts.
 * Included by C11 (the library) and C++17 (the harness); docs/simulator.md explains it.
 *
 * 1. The client creates a memfd holding its "host memory" (struct pn_sim_ctl, the MMIO
 *    queue, status block, RX ring, TX ring, DMA heap), connects to the harness's UNIX
 *    socket (SOCK_SEQPACKET) and sends struct pn_sim_hello with the memfd (SCM_RIGHTS).
 * 2. The harness maps the memfd into the node's DMA address space at
 *    PN_SIM_DMA_BASE(ctx), programs the context through the CSRs as a driver would
 *    (rings, status block, DMA window, reset, enable) and answers struct
 *    pn_sim_welcome with the fd of its global shared memory (struct pn_sim_global:
 *    the cycle counter and per-context trace records).
 * 3. MMIO travels through the SPSC ring in the client's memory (struct pn_sim_op):
 *    the client writes entries and advances q_head; the harness takes them, stamps
 *    them with the current cycle and applies them on the node's Wishbone bus after the
 *    PCIe latency; a read's value comes back in r_value/r_seq.
 * 4. Closing the socket (or dying) detaches: the harness disables and resets the
 *    context, waits until the NIC can no longer DMA into the memory, then unmaps it.
 *
 * While the harness sleeps (nothing in flight) it sets pn_sim_global.sleeping; a
 * client that pushed an entry then sends one byte on its socket to wake it.
 */
#ifndef PN_SIM_SHM_H
#define PN_SIM_SHM_H

#include <stdint.h>

#define PN_SIM_VERSION 1u
#define PN_SIM_MAGIC_HELLO 0x4f4c4c45484d4953ull    /* "SIMHELLO" */
#define PN_SIM_MAGIC_WELCOME 0x454d4f434c574d53ull  /* "SMWLCOME" */
#define PN_SIM_MAGIC_CTL 0x4c54434d49534e50ull      /* "PNSIMCTL" */
#define PN_SIM_MAGIC_GLOBAL 0x4c424c474d49534eull   /* "NSIMGLBL" */

/* DMA address of byte 0 of context c's shared memory (every node has its own space):
 * 64 GiB per context, so a DMA address names the context it belongs to. */
#define PN_SIM_DMA_SHIFT 36
#define PN_SIM_DMA_BASE(c) (((uint64_t)(c) + 1) << PN_SIM_DMA_SHIFT)
#define PN_SIM_MAX_MEM (1ull << PN_SIM_DMA_SHIFT)

/* Queue entry kinds. */
enum pn_sim_op_kind {
	PN_SIM_OP_W32 = 1,    /* 32-bit store at context-page offset `off` */
	PN_SIM_OP_W64 = 2,    /* 64-bit store (two bus writes, low word first) */
	PN_SIM_OP_R32 = 3,    /* 32-bit load from the context page; value = sequence number */
	PN_SIM_OP_RCSR = 4,   /* 32-bit load of a read-only CSR word at byte address `off` */
	PN_SIM_OP_WINDOW = 5, /* driver call: DMA window = heap base .. + value bytes */
};

struct pn_sim_op {
	uint32_t kind;
	uint32_t off;
	uint64_t value;
};

/* At offset 0 of the client's memfd. Each line is written by one side only. */
struct pn_sim_ctl {
	uint64_t magic;            /* PN_SIM_MAGIC_CTL, written by the client */
	uint32_t version;
	uint32_t qsize;            /* queue entries, power of two */
	uint64_t queue_off;        /* byte offset of the pn_sim_op array */
	uint8_t pad0[64 - 24];
	uint64_t q_head;           /* client: entries pushed (absolute) */
	uint8_t pad1[56];
	uint64_t q_tail;           /* harness: entries taken (absolute) */
	uint8_t pad2[56];
	uint64_t r_value;          /* harness: value of the last read ... */
	uint64_t r_seq;            /* ... and its sequence number, stored after the value */
	uint8_t pad3[48];
};

/* Client -> harness, first message on the socket, with the memfd. Offsets are bytes
 * into the memfd; every region is 4 KiB aligned (the status block 64-byte aligned). */
struct pn_sim_hello {
	uint64_t magic;
	uint32_t version;
	int32_t node;              /* this process's node id */
	int32_t ctx;               /* a context, or -1 for any free one */
	int32_t nodes;             /* job size (0: the running job's, else the cluster's) */
	int32_t pid;
	uint32_t rx_log2, tx_log2; /* ring sizes */
	uint32_t flags;            /* PN_SIM_HELLO_* (0 for libparanic's sim backend) */
	uint64_t mem_bytes;        /* size of the memfd */
	uint64_t status_off, rx_off, tx_off, heap_off, heap_bytes;
};

/* hello.flags: a *device client* (sim/qemu/pn_proxydev: a QEMU guest's PCI function).
 * It takes a whole node (no context of it may be attached) and sends two fds: its
 * memfd (control block and MMIO queue only; rings and offsets unused) and the guest's
 * RAM (a memfd whose offset is the guest-physical address, heap_bytes long). Its
 * queue entries address BAR0 (off < PN_BAR0_BYTES: context pages and CSRs); the node's
 * DMA goes to guest RAM (bus address = offset). The harness configures nothing: the
 * guest's driver does, through the CSRs. On detach every context is disabled and reset. */
#define PN_SIM_HELLO_DEVICE 0x1u

/* Harness -> client: the answer (with the global shm fd when status == 0). */
struct pn_sim_welcome {
	uint64_t magic;
	uint32_t version;
	int32_t status;            /* 0 or -errno */
	uint32_t node, nodes;      /* nodes: the job's size (<= sim_nodes) */
	uint32_t sim_nodes, ctx, n_ctx, mtu;
	uint32_t csr_dropped;      /* CSR byte address of host_err_unknown_ctx (RCSR) */
	uint32_t rsvd;
	uint64_t dma_base;         /* DMA address of memfd offset 0 */
	uint64_t global_bytes;     /* size of the global shm */
	char topo[32];
};

/* Per (node, context) records in the global shm, written by the harness, in cycles of
 * the harness's clock. Definitions (docs/simulator.md):
 *  issue_cycle         the cycle the harness took the first MMIO store of the latest send
 *                      from the client's queue (PIO: first store after the previous
 *                      PIO_DOORBELL; DMA: the TX_TAIL store): the CPU's issue time;
 *  pio_doorbell_cycle  the cycle the latest PIO_DOORBELL write was acknowledged on the bus;
 *  tx_tail_cycle       the same for TX_TAIL;
 *  rx_valid_cycle      the cycle the latest RX valid word became visible in host memory
 *                      (DMA write latency included); rx_valid_count is its value;
 *  barrier_enter_cycle the cycle the latest BARRIER write was acknowledged on the bus;
 *  barrier_done_cycle  the cycle a status-block write raising barrier_done became
 *                      visible; barrier_done_count its value;
 *  status_cycle        the cycle the latest status-block write became visible;
 *  generation          incremented on every attach to this context. */
struct pn_sim_trace {
	uint64_t generation;
	uint64_t issue_cycle;
	uint64_t pio_doorbell_cycle;
	uint64_t tx_tail_cycle;
	uint64_t rx_valid_cycle;
	uint64_t rx_valid_count;
	uint64_t barrier_enter_cycle;
	uint64_t barrier_done_cycle;
	uint64_t barrier_done_count;
	uint64_t status_cycle;
	uint64_t pio_doorbells;    /* PIO doorbells applied on the bus since attach */
	uint64_t tx_tails;         /* TX_TAIL writes applied since attach */
	uint64_t rx_valids;        /* RX valid words written since attach */
	uint64_t pad[3];
};

/* The harness's global shared memory (read-only for clients). */
struct pn_sim_global {
	uint64_t magic;
	uint32_t version;
	uint32_t hdr_bytes;        /* sizeof(struct pn_sim_global) */
	uint32_t nodes, n_ctx, mtu, clk_hz;
	uint32_t topo_x, topo_y;
	uint32_t trace_off, trace_stride;   /* trace of (node, ctx): trace_off + (node * n_ctx + ctx) * stride */
	uint32_t mmio_write_cycles, mmio_read_cycles, dma_read_cycles, dma_write_cycles;
	uint32_t pid;
	uint8_t pad0[128 - 68];
	uint64_t cycle;            /* the clock: rising edges since the harness started */
	uint8_t pad1[56];
	uint32_t sleeping;         /* nothing in flight: the harness waits for a wake byte */
	uint32_t clients;          /* clients attached */
	uint64_t dma_refused;      /* DMA requests outside client memory (refused, logged) */
	uint64_t mmio_ops;         /* client MMIO operations applied */
	uint64_t job_nodes;        /* size of the running job (0: none) */
	uint8_t pad2[64 - 32];
};

#define PN_SIM_TRACE_OFF 256u

#ifdef __cplusplus
#define PN_SIM_STATIC_ASSERT static_assert
#else
#define PN_SIM_STATIC_ASSERT _Static_assert
#endif
PN_SIM_STATIC_ASSERT(sizeof(struct pn_sim_ctl) == 256, "pn_sim_ctl layout");
PN_SIM_STATIC_ASSERT(sizeof(struct pn_sim_op) == 16, "pn_sim_op layout");
PN_SIM_STATIC_ASSERT(sizeof(struct pn_sim_trace) == 128, "pn_sim_trace layout");
PN_SIM_STATIC_ASSERT(sizeof(struct pn_sim_hello) == 88, "pn_sim_hello layout");
PN_SIM_STATIC_ASSERT(sizeof(struct pn_sim_welcome) == 96, "pn_sim_welcome layout");
PN_SIM_STATIC_ASSERT(sizeof(struct pn_sim_global) == 256, "pn_sim_global layout");
PN_SIM_STATIC_ASSERT(PN_SIM_TRACE_OFF >= sizeof(struct pn_sim_global), "trace offset");

#endif /* PN_SIM_SHM_H */
