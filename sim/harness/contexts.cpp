/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * paranic-sim: a client's context: programmed at attach, disabled, quiesced and reset
 * at detach, its DMA window changed. See docs/simulator.md.
 */
#include "harness.h"

/* Configure a client's context: rings, status block, DMA window; enable or disable. */
Script *Harness::ctx_script(Client *cl, bool enable, bool reset)
{
	Script *s = new Script;
	uint64_t base = PN_SIM_DMA_BASE(cl->ctx);
	const pn_sim_hello &h = cl->hello;
	s->csr_write(PN_CSR_HOST_CTX_SEL, PN_CSR_HOST_CTX_SEL_SIZE, (uint64_t)cl->ctx);
	s->csr_write(PN_CSR_HOST_CTX_ENABLE, 1, enable);
	s->csr_write(PN_CSR_HOST_CTX_RX_BASE, PN_CSR_HOST_CTX_RX_BASE_SIZE, base + h.rx_off);
	s->csr_write(PN_CSR_HOST_CTX_RX_LOG2, PN_CSR_HOST_CTX_RX_LOG2_SIZE, h.rx_log2);
	s->csr_write(PN_CSR_HOST_CTX_TX_BASE, PN_CSR_HOST_CTX_TX_BASE_SIZE, base + h.tx_off);
	s->csr_write(PN_CSR_HOST_CTX_TX_LOG2, PN_CSR_HOST_CTX_TX_LOG2_SIZE, h.tx_log2);
	s->csr_write(PN_CSR_HOST_CTX_STATUS_ADDR, PN_CSR_HOST_CTX_STATUS_ADDR_SIZE, enable ? base + h.status_off : 0);
	s->csr_write(PN_CSR_HOST_CTX_WIN_BASE, PN_CSR_HOST_CTX_WIN_BASE_SIZE, base + h.heap_off);
	s->csr_write(PN_CSR_HOST_CTX_WIN_SIZE, PN_CSR_HOST_CTX_WIN_SIZE_SIZE, enable ? cl->window : 0);
	s->csr_write(PN_CSR_HOST_CTX_WRITE, 1, 1);
	if (reset)
		s->csr_write(PN_CSR_HOST_CTX_RESET, 1, 1);
	return s;
}

void Harness::configure(Client *cl)
{
	Script *s = ctx_script(cl, true, true);
	uint64_t gen = cl->gen;
	s->done = [this, cl, gen](Script &) {
		if (cl->st != CState::Config || cl->gen != gen)
			return;   /* it hung up meanwhile: teardown is under way */
		welcome(cl);
	};
	hosts[cl->node]->push_script(s, cycle + cfg.c_mmio_w);
}

/* Detach: disable the context (no new DMA for it), wait until the NIC has finished what
 * it had started (PIO packet, descriptors, RX packet, status write) and until DMA writes
 * in flight are visible, reset the context, and only then unmap the client's memory. */
void Harness::teardown_step(Client *cl)
{
	switch (cl->td_phase) {
	case 0: {
		Script *s = ctx_script(cl, false, false);
		s->done = [this, cl](Script &) {
			cl->td_phase = 1;
			teardown_step(cl);
		};
		hosts[cl->node]->push_script(s, cycle);
		break;
	}
	case 1: {
		Script *s = new Script;
		s->csr_write(PN_CSR_HOST_CTX_SEL, PN_CSR_HOST_CTX_SEL_SIZE, (uint64_t)cl->ctx);
		s->csr_read(PN_CSR_HOST_CTX_STATE);
		s->done = [this, cl](Script &sc) {
			uint32_t st = sc.reads.empty() ? 0xff : sc.reads[0];
			bool quiet = !(st & PN_CTX_STATE_BUSY);
			if (!quiet && cycle - cl->td_start > 4000000) {
				sim_log("node %d ctx %d: still busy (state %#x) %llu cycles after disable; resetting anyway",
					cl->node, cl->ctx, st, (unsigned long long)(cycle - cl->td_start));
				quiet = true;
			}
			if (quiet) {
				cl->td_phase = 2;
				cl->td_wait_until = cycle + cfg.c_dma_w + cfg.c_dma_r + 64;
			} else {
				teardown_step(cl);   /* poll again */
			}
		};
		hosts[cl->node]->push_script(s, cycle + 32);
		break;
	}
	case 2: {
		if (cycle < cl->td_wait_until)
			break;
		cl->td_phase = 3;
		Script *s = new Script;
		s->csr_write(PN_CSR_HOST_CTX_SEL, PN_CSR_HOST_CTX_SEL_SIZE, (uint64_t)cl->ctx);
		s->csr_write(PN_CSR_HOST_CTX_RESET, 1, 1);
		s->done = [this, cl](Script &) {
			sim_log("node %d ctx %d: reset and free %llu cycles after the client left", cl->node, cl->ctx,
				(unsigned long long)(cycle - cl->td_start));
			free_client(cl);
		};
		hosts[cl->node]->push_script(s, cycle);
		break;
	}
	default:
		break;
	}
}
