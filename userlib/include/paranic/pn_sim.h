/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * libparanic: what the `sim` backend offers beyond the HAL (docs/simulator.md).
 *
 * The Verilator cluster simulator (`paranic-sim`) owns a cycle counter and records,
 * per (node, context), the cycles at which the hardware path of a send and a receive
 * passed fixed points, so that a benchmark can report the hardware latency in
 * simulated time, e.g. one way:  rx_valid_cycle(receiver) - issue_cycle(sender).
 */
#ifndef PN_SIM_H
#define PN_SIM_H

#include <stdint.h>

#include "pn_hal.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pn_sim_trace_rec {
	uint64_t generation;          /* attaches to this context so far (changes on reuse) */
	uint64_t issue_cycle;         /* harness took the send's first MMIO store (PIO: first window
	                               * store after the previous doorbell; DMA: the TX_TAIL store) */
	uint64_t pio_doorbell_cycle;  /* the last PIO_DOORBELL write was acknowledged on the bus */
	uint64_t tx_tail_cycle;       /* the last TX_TAIL write was acknowledged on the bus */
	uint64_t rx_valid_cycle;      /* the last RX valid word became visible in host memory */
	uint64_t rx_valid_count;      /* ... and its value (packet number + 1) */
	uint64_t barrier_enter_cycle; /* the last BARRIER write was acknowledged on the bus */
	uint64_t barrier_done_cycle;  /* a status-block write raising barrier_done became visible */
	uint64_t barrier_done_count;  /* ... and the value it raised it to */
	uint64_t status_cycle;        /* the last status-block write became visible */
	uint64_t pio_doorbells;       /* PIO doorbells applied since the attach */
	uint64_t tx_tails;            /* TX_TAIL writes applied since the attach */
	uint64_t rx_valids;           /* RX valid words written since the attach */
} pn_sim_trace_t;

typedef struct pn_sim_info {
	uint32_t nodes;               /* the simulated cluster's nodes (>= pn_num_nodes: the job) */
	uint32_t topo_x, topo_y;      /* ring: topo_y == 1 */
	uint32_t clk_hz;              /* cycles per second of simulated time */
	uint32_t mmio_write_cycles;   /* PCIe model: CPU store -> device bus */
	uint32_t mmio_read_cycles;    /* CPU load round trip */
	uint32_t dma_read_cycles;     /* DMA read request -> first completion */
	uint32_t dma_write_cycles;    /* DMA write -> visible in host memory */
	uint64_t cycle;               /* now */
	uint64_t dma_refused;         /* DMA requests the harness refused (outside client memory) */
} pn_sim_info_t;

/* The trace record of (node, ctx) of the simulated cluster; -ENOTSUP when h is not on
 * the sim backend, -EINVAL for a bad node or context. */
int pn_sim_trace(pn_hal_t *h, unsigned node, unsigned ctx, pn_sim_trace_t *out);
/* The simulator's shape, PCIe model and counters; -ENOTSUP when not on sim. */
int pn_sim_info(pn_hal_t *h, pn_sim_info_t *out);

#ifdef __cplusplus
}
#endif
#endif /* PN_SIM_H */
