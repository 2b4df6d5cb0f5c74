/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * paranic-sim: the host address space the NIC's DMA sees (the regions a client gave
 * for the NIC to read or write, or a guest's RAM), refused accesses, PCIe rule
 * violations, and the trace records of DMA writes (RX valid words, status blocks).
 * See docs/simulator.md.
 */
#include <cstdarg>
#include <cstring>

#include "harness.h"

uint8_t *Harness::dma_ptr(int node, uint64_t adr, uint32_t n, bool write, Client **owner)
{
	if (Client *d = dev_owner[node]) {
		/* A guest's node: bus address = guest-physical address, all of its RAM (a PC
		 * without an IOMMU lets a bus master reach all of it). */
		if (!d->ram || adr > d->ram_bytes || n > d->ram_bytes - adr)
			return nullptr;
		*owner = d;
		return d->ram + adr;
	}
	uint64_t c = (adr >> PN_SIM_DMA_SHIFT);
	if (c == 0 || c > SIM_N_CTX)
		return nullptr;
	Client *cl = this->owner[node][c - 1];
	if (!cl || !cl->mem)
		return nullptr;
	uint64_t off = adr - PN_SIM_DMA_BASE(c - 1);
	const pn_sim_hello &h = cl->hello;
	auto in = [&](uint64_t lo, uint64_t len) { return off >= lo && off + n <= lo + len && off + n >= off; };
	bool ok = write ? (in(h.status_off, PN_STATUS_BLOCK_BYTES) || in(h.rx_off, cl->rx_bytes))
			: (in(h.tx_off, cl->tx_bytes) || in(h.heap_off, h.heap_bytes));
	if (!ok)
		return nullptr;
	*owner = cl;
	return cl->mem + off;
}

void Harness::dma_refused(int node, const char *what, uint64_t adr, uint32_t n)
{
	uint64_t k = __atomic_add_fetch(&g->dma_refused, 1, __ATOMIC_RELAXED);   /* lanes: windows */
	if (k <= 50 || k % 1000 == 0)
		sim_log("node %d cycle %llu: DMA %s %#llx+%u outside client memory: refused (%llu so far)", node,
			(unsigned long long)now(), what, (unsigned long long)adr, n, (unsigned long long)k);
}

void Harness::protocol_error(int node, const char *fmt, ...)
{
	char buf[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (__atomic_add_fetch(&errors, 1, __ATOMIC_RELAXED) <= 100)
		sim_log("node %d cycle %llu: PCIe rule broken: %s", node, (unsigned long long)now(), buf);
}

void Harness::dma_written(int node, Client *cl, uint64_t adr, uint32_t n, const uint8_t *data)
{
	const uint64_t cycle = now();   /* a window's lane runs this node ahead of this->cycle */
	if (sim_verbose > 2)
		sim_log("node %d: DMA write of %u bytes at 0x%llx, cycle %llu", node, n, (unsigned long long)adr,
			(unsigned long long)cycle);
	if (cl->device)
		return;   /* no trace records for a guest's node */
	const pn_sim_hello &h = cl->hello;
	uint64_t off = adr - PN_SIM_DMA_BASE(cl->ctx);
	pn_sim_trace *t = cl->trace;
	if (off >= h.rx_off && off < h.rx_off + cl->rx_bytes) {
		uint64_t rel = off - h.rx_off;
		uint64_t slot = rel / cl->slot_bytes;
		uint64_t voff = slot * cl->slot_bytes + cl->slot_bytes - PN_RX_VALID_BYTES;
		if (rel <= voff && rel + n >= voff + 8) {
			uint64_t v;
			memcpy(&v, data + (voff - rel), 8);
			store64(&t->rx_valid_count, v);
			store64(&t->rx_valid_cycle, cycle);
			store64(&t->rx_valids, t->rx_valids + 1);
			owe(cl);   /* a packet the client may be polling for */
		}
	} else if (off == h.status_off && n >= PN_STATUS_BLOCK_BYTES) {
		uint32_t bd;
		memcpy(&bd, data + 4 * PN_STS_BARRIER_DONE_WORD, 4);
		if (bd != cl->last_barrier_done) {
			cl->last_barrier_done = bd;
			store64(&t->barrier_done_count, bd);
			store64(&t->barrier_done_cycle, cycle);
		}
		store64(&t->status_cycle, cycle);
		owe(cl);   /* TX / PIO done or a barrier: what its send and barrier waits poll */
	}
}
