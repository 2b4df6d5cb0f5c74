/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * paranic-sim: context programming. The sequences of paranic/pn_ctxseq.h, the C code
 * the driver runs, run on a node's bus: each run's register accesses become Scripts, a
 * busy context is polled every POLL_CYCLES, SETTLE waits the DMA latencies in the run
 * loop. A client's context is opened at attach, closed at detach before its memory is
 * unmapped, and reprogrammed when it changes its DMA window. See docs/simulator.md.
 */
#include <algorithm>
#include <cerrno>

#include "harness.h"

/* The context registers of pn_ctxseq.h as this build's CSRs (pn_csr.h), in enum order. */
static const struct {
	uint32_t addr;
	unsigned bits;
} CTXREG_CSR[PN_CTXREG_COUNT] = {
#define CTXREG_CSR_(NAME, name) {PN_CSR_HOST_CTX_##NAME, PN_CSR_HOST_CTX_##NAME##_SIZE},
	PN_CTXREGS(CTXREG_CSR_)
#undef CTXREG_CSR_
};

/* A busy context is read again this many cycles later; a run resets it anyway once it
 * has been busy this long (the NIC is stuck: better a reset than a context lost). */
static const uint64_t POLL_CYCLES = 32;
static const uint64_t GIVE_UP_CYCLES = 4000000;

CtxRun *Harness::ctx_new(int node, pn_ctxseq_kind kind, const pn_ctxseq_cfg &c)
{
	CtxRun *r = new CtxRun;
	pn_ctxseq_init(&r->seq, kind, &c);
	r->node = node;
	r->start = cycle;
	return r;
}

/* The run goes on with a Script that is filled when it reaches the bus. */
void Harness::ctx_push(CtxRun *r, uint64_t due)
{
	Script *s = new Script;
	s->build = [this, r](Script &sc) { ctx_build(r, sc); };
	s->done = [this, r](Script &sc) { ctx_after(r, sc); };
	hosts[r->node]->push_script(s, due);
}

/* The accesses up to the next READ, RETRY, SETTLE or DONE, run as one script. */
void Harness::ctx_build(CtxRun *r, Script &sc)
{
	sc.steps.clear();
	if (r->live && !r->live()) {
		r->abandoned = true;   /* its owner left meanwhile: leave the context alone */
		return;
	}
	for (;;) {
		pn_ctxseq_next(&r->seq, r->read, &r->op);
		if (r->op.kind != PN_CTXOP_WRITE)
			break;
		sc.csr_write(CTXREG_CSR[r->op.reg].addr, CTXREG_CSR[r->op.reg].bits, r->op.value);
	}
	if (r->op.kind == PN_CTXOP_READ)
		sc.csr_read(CTXREG_CSR[r->op.reg].addr);
}

void Harness::ctx_after(CtxRun *r, Script &sc)
{
	if (r->abandoned) {
		delete r;
		return;
	}
	switch (r->op.kind) {
	case PN_CTXOP_READ:
		r->read = sc.reads.empty() ? 0xffffffffu : sc.reads.back();
		ctx_push(r, cycle);
		break;
	case PN_CTXOP_RETRY:
		if (r->give_up && r->give_up((uint32_t)r->op.value)) {
			pn_ctxseq_give_up(&r->seq, -ETIMEDOUT, PN_CTXSEQ_RESET_ANYWAY);
			ctx_push(r, cycle);
		} else {
			ctx_push(r, cycle + POLL_CYCLES);
		}
		break;
	case PN_CTXOP_SETTLE:
		/* Writes the NIC issued before it went quiet become visible. */
		r->wait_until = cycle + cfg.c_dma_w + cfg.c_dma_r + 64;
		ctx_waiting.push_back(r);
		break;
	default:
		if (r->done)
			r->done(r->op.status);
		delete r;
		break;
	}
}

void Harness::ctx_tick()
{
	std::vector<CtxRun *> still;
	for (CtxRun *r : ctx_waiting) {
		if (r->wait_until <= cycle)
			ctx_push(r, cycle);
		else
			still.push_back(r);
	}
	ctx_waiting.swap(still);
}

bool Harness::ctx_overdue(const CtxRun *r) const
{
	return cycle - r->start > GIVE_UP_CYCLES;
}

/* A client's context: its rings, status block and DMA window (the heap) in its memory. */
pn_ctxseq_cfg Harness::ctx_cfg(const Client *cl) const
{
	uint64_t base = PN_SIM_DMA_BASE(cl->ctx);
	const pn_sim_hello &h = cl->hello;
	pn_ctxseq_cfg c{};
	c.ctx = (uint32_t)cl->ctx;
	c.rx_log2 = h.rx_log2;
	c.tx_log2 = h.tx_log2;
	c.rx_base = base + h.rx_off;
	c.tx_base = base + h.tx_off;
	c.status_addr = base + h.status_off;
	c.win_base = base + h.heap_off;
	c.win_size = cl->window;
	return c;
}

/* A busy context logged and reset anyway once a run has waited GIVE_UP_CYCLES. */
std::function<bool(uint32_t)> Harness::ctx_give_up_when_overdue(CtxRun *r)
{
	return [this, r](uint32_t state) {
		if (!ctx_overdue(r))
			return false;
		sim_log("node %d ctx %u: still busy (state %#x) %llu cycles after disable; resetting anyway", r->node,
			r->seq.cfg.ctx, state, (unsigned long long)(cycle - r->start));
		return true;
	};
}

/* Attach: OPEN, then the welcome. */
void Harness::configure(Client *cl)
{
	uint64_t gen = cl->gen;
	CtxRun *r = ctx_new(cl->node, PN_CTXSEQ_OPEN, ctx_cfg(cl));
	r->live = [cl, gen] { return cl->st == CState::Config && cl->gen == gen; };
	r->give_up = ctx_give_up_when_overdue(r);
	r->done = [this, cl, gen](int) {
		if (cl->st != CState::Config || cl->gen != gen)
			return;   /* it hung up meanwhile: teardown is under way */
		welcome(cl);
	};
	ctx_push(r, cycle + cfg.c_mmio_w);
}

/* Detach: CLOSE (no new DMA for the context, the NIC finishes what it had started,
 * writes in flight land, reset), and only then unmap the client's memory. */
void Harness::teardown(Client *cl)
{
	coll_release(cl);
	CtxRun *r = ctx_new(cl->node, PN_CTXSEQ_CLOSE, ctx_cfg(cl));
	r->give_up = ctx_give_up_when_overdue(r);
	r->done = [this, cl](int) {
		sim_log("node %d ctx %d: reset and free %llu cycles after the client left", cl->node, cl->ctx,
			(unsigned long long)(cycle - cl->td_start));
		free_client(cl);
	};
	ctx_push(r, cycle);
}

/* The driver's "register memory" call: the DMA window grows or shrinks (WINDOW). In
 * order with the client's MMIO, so a doorbell after it sees the new window. The
 * memory stays mapped until detach, so a shrink need not wait for descriptors. */
void Harness::set_window(Client *cl, uint64_t bytes)
{
	cl->window = std::min<uint64_t>(bytes, cl->hello.heap_bytes);
	uint64_t gen = cl->gen;
	CtxRun *r = ctx_new(cl->node, PN_CTXSEQ_WINDOW, ctx_cfg(cl));
	r->live = [cl, gen] { return cl->st == CState::Active && cl->gen == gen; };
	ctx_push(r, cycle + cfg.c_mmio_w);
}
