/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * paranic-sim: the clients' MMIO queues: entries taken onto their node's bus (checked,
 * with back-pressure), loads answered after the read latency, bad entries logged. See
 * docs/simulator.md ("Attach and MMIO").
 */
#include <algorithm>
#include <cstdarg>

#include "harness.h"

/* Operations a node's MMIO queue takes ahead of its bus. */
static const size_t SIM_MAX_QUEUED = 4096;

void Harness::client_error(Client *cl, const char *fmt, ...)
{
	char buf[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (__atomic_add_fetch(&client_errors, 1, __ATOMIC_RELAXED) <= 100)   /* lanes: windows */
		sim_log("client %llu (pid %d, node %d ctx %d): bad queue entry ignored: %s", (unsigned long long)cl->id,
			cl->pid, cl->node, cl->ctx, buf);
}

/* A store that rings the PIO doorbell: PIO_DOORBELL, or PIO_SEND's upper half (the
 * store+doorbell, docs/host-interface.md). */
static bool rings_pio(int kind, uint32_t off)
{
	return (kind == PN_SIM_OP_W32 && (off == PN_REG_PIO_DOORBELL || off == PN_REG_PIO_SEND + 4)) ||
	       (kind == PN_SIM_OP_W64 && off == PN_REG_PIO_SEND);
}

/* A store into the PIO window, or PIO_SEND's lower half alone (window word 0). */
static bool stages_pio(int kind, uint32_t off)
{
	return off >= PN_PIO_WINDOW_OFFSET || (kind == PN_SIM_OP_W32 && off == PN_REG_PIO_SEND);
}

bool Harness::item_live(const MmioItem &it) const
{
	return it.cl->st == CState::Active && it.cl->gen == it.cl_gen;
}

void Harness::op_done(int node, const MmioItem &it, const uint32_t *vals, uint64_t cyc)
{
	Client *cl = it.cl;
	pn_sim_trace *t = cl->trace;
	__atomic_add_fetch(&g->mmio_ops, 1, __ATOMIC_RELAXED);   /* lanes of a window run this side by side */
	if (rings_pio(it.kind, it.off)) {
		store64(&t->pio_doorbell_cycle, cyc);
		store64(&t->pio_doorbells, t->pio_doorbells + 1);
	}
	switch (it.kind) {
	case PN_SIM_OP_W32:
		if (it.off == PN_REG_TX_TAIL) {
			store64(&t->tx_tail_cycle, cyc);
			store64(&t->tx_tails, t->tx_tails + 1);
		} else if (it.off == PN_REG_BARRIER) {
			store64(&t->barrier_enter_cycle, cyc);
		}
		break;
	case PN_SIM_OP_R32:
	case PN_SIM_OP_RCSR:
		(sim_lane ? sim_lane->replies : replies)
			.push_back({std::max(cyc + 1, it.obs + cfg.c_mmio_r), cl, it.cl_gen, it.value, vals[0]});
		break;
	default:
		break;
	}
	(void)node;
}

void Harness::pull_queues()
{
	for (Client *cl : clients)
		if (cl->st == CState::Active && !pull_client(cl))
			return;   /* it was hung up: `clients` changed */
}

/* The client's new queue entries onto its node's bus, in cycle now(). Within a window
 * (on its node's lane) what needs the harness's thread, a window-size operation or a
 * queue head out of range, is left in the queue for the window's end: false. */
bool Harness::pull_client(Client *cl)
{
	const uint64_t cycle = now();
	std::vector<Reply> &replies = sim_lane ? sim_lane->replies : this->replies;
	{
		uint64_t head = __atomic_load_n(&cl->ctl->q_head, __ATOMIC_ACQUIRE);
		if (head == cl->q_tail)
			return true;
		if (head - cl->q_tail > cl->qmask + 1) {
			if (sim_lane)
				return false;
			sim_log("client %llu: queue head %llu beyond tail %llu + size: detaching it",
				(unsigned long long)cl->id, (unsigned long long)head, (unsigned long long)cl->q_tail);
			hangup(cl);
			return false;
		}
		bool held = false;
		Host *h = hosts[cl->node];
		/* Back-pressure: a node takes at most SIM_MAX_QUEUED operations ahead of its bus
		 * (like a full posted-write buffer); the rest waits in the clients' queues. */
		while (cl->q_tail != head && h->queued() < SIM_MAX_QUEUED) {
			pn_sim_op op = cl->queue[cl->q_tail & cl->qmask];
			if (sim_lane && op.kind == PN_SIM_OP_WINDOW) {
				held = true;   /* set_window runs a script: at the window's end */
				break;
			}
			cl->q_tail++;
			cl->ops++;
			MmioItem it{};
			it.due = cycle + cfg.c_mmio_w;
			it.obs = cycle;
			it.kind = op.kind;
			it.off = op.off;
			it.value = op.value;
			it.cl = cl;
			it.cl_gen = cl->gen;
			if (cl->device) {
				/* BAR0 offsets: context pages and CSRs, as the guest's driver wrote them. */
				bool rd = op.kind == PN_SIM_OP_R32 || op.kind == PN_SIM_OP_RCSR;
				if ((op.kind != PN_SIM_OP_W32 && op.kind != PN_SIM_OP_W64 && !rd) ||
				    op.off >= PN_BAR0_BYTES || op.off % (op.kind == PN_SIM_OP_W64 ? 8 : 4)) {
					client_error(cl, "device access kind %u at BAR0 offset %#x", op.kind, op.off);
					if (rd)
						replies.push_back({cycle + cfg.c_mmio_r, cl, cl->gen, op.value, 0xffffffffu});
					continue;
				}
				if (op.kind == PN_SIM_OP_RCSR)
					it.kind = PN_SIM_OP_R32;
				h->push_client_op(it);
				continue;
			}
			switch (op.kind) {
			case PN_SIM_OP_W32:
			case PN_SIM_OP_W64:
				if (op.off >= PN_CTX_PAGE_BYTES || op.off % (op.kind == PN_SIM_OP_W64 ? 8 : 4)) {
					client_error(cl, "store at page offset %#x", op.off);
					continue;
				}
				if (stages_pio(op.kind, op.off)) {
					if (!cl->pio_started) {
						cl->pio_started = true;
						store64(&cl->trace->issue_cycle, cycle);
					}
				} else if (rings_pio(op.kind, op.off)) {
					if (!cl->pio_started)
						store64(&cl->trace->issue_cycle, cycle);
					cl->pio_started = false;
				} else if (op.kind == PN_SIM_OP_W32 && op.off == PN_REG_TX_TAIL) {
					store64(&cl->trace->issue_cycle, cycle);
				}
				h->push_client_op(it);
				break;
			case PN_SIM_OP_R32:
				if (op.off >= PN_CTX_PAGE_BYTES || op.off % 4) {
					client_error(cl, "load at page offset %#x", op.off);
					replies.push_back({cycle + cfg.c_mmio_r, cl, cl->gen, op.value, 0xffffffffu});
					continue;
				}
				h->push_client_op(it);
				break;
			case PN_SIM_OP_RCSR:
				if (op.off < PN_CSR_LO || op.off > PN_CSR_HI || op.off % 4) {
					client_error(cl, "CSR load at %#x", op.off);
					replies.push_back({cycle + cfg.c_mmio_r, cl, cl->gen, op.value, 0xffffffffu});
					continue;
				}
				h->push_client_op(it);
				break;
			case PN_SIM_OP_WINDOW:
				set_window(cl, op.value);   /* contexts.cpp */
				break;
			default:
				client_error(cl, "unknown kind %u", op.kind);
				break;
			}
		}
		__atomic_store_n(&cl->ctl->q_tail, cl->q_tail, __ATOMIC_RELEASE);
		if (sim_lane)
			sim_lane->activity = std::max(sim_lane->activity, cycle);
		else
			last_activity = cycle;
		return !held;
	}
}
