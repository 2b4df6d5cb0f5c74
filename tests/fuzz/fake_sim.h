/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * A simulator's welcome and global shared memory as the harness makes them
 * (sim/harness/server.cpp setup_shm, clients.cpp), for a cluster of FAKE_SIM_NODES
 * nodes of FAKE_SIM_NCTX contexts: the valid message that gen_corpus.c's seeds and
 * crashers and peers.c's lying simulator start from.
 */
#ifndef PN_FAKE_SIM_H
#define PN_FAKE_SIM_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "paranic/pn_protocol.h"
#include "pn_sim_shm.h"

enum { FAKE_SIM_NODES = 4, FAKE_SIM_NCTX = 16, FAKE_SIM_MTU = 1024 };

/* Where the node status table starts: after the trace table. */
static inline size_t fake_sim_status_off(void)
{
	return PN_SIM_TRACE_OFF + (size_t)FAKE_SIM_NODES * FAKE_SIM_NCTX * sizeof(struct pn_sim_trace);
}

/* Bytes of the global shared memory. */
static inline size_t fake_sim_global_bytes(void)
{
	return fake_sim_status_off() + FAKE_SIM_NODES * sizeof(struct pn_sim_node_status);
}

/* Fill the header of a zeroed global shared memory of fake_sim_global_bytes(). */
static inline void fake_sim_global(struct pn_sim_global *g)
{
	g->magic = PN_SIM_MAGIC_GLOBAL;
	g->version = PN_SIM_VERSION;
	g->hdr_bytes = sizeof(*g);
	g->nodes = FAKE_SIM_NODES;
	g->n_ctx = FAKE_SIM_NCTX;
	g->mtu = FAKE_SIM_MTU;
	g->clk_hz = PN_TARGET_CLK_HZ;
	g->topo_x = FAKE_SIM_NODES;
	g->topo_y = 1;
	g->trace_off = PN_SIM_TRACE_OFF;
	g->trace_stride = sizeof(struct pn_sim_trace);
	g->status_off = (uint32_t)fake_sim_status_off();
	g->status_stride = sizeof(struct pn_sim_node_status);
	g->status_period = 20000;
}

/* The welcome of node `node` of a 2-node job, on context `ctx`. */
static inline struct pn_sim_welcome fake_sim_welcome(uint32_t node, uint32_t ctx)
{
	struct pn_sim_welcome w;

	memset(&w, 0, sizeof(w));
	w.magic = PN_SIM_MAGIC_WELCOME;
	w.version = PN_SIM_VERSION;
	w.node = node;
	w.nodes = 2;
	w.sim_nodes = FAKE_SIM_NODES;
	w.ctx = ctx;
	w.n_ctx = FAKE_SIM_NCTX;
	w.mtu = FAKE_SIM_MTU;
	w.dma_base = PN_SIM_DMA_BASE(ctx);
	w.global_bytes = fake_sim_global_bytes();
	return w;
}

#endif /* PN_FAKE_SIM_H */
