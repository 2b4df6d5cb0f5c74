/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * paranic-sim: the status snapshot. Every --status-period cycles the harness reads each
 * node's identity, firmware-status and link CSRs (one background script per CSR word, so a
 * client's MMIO never waits behind more than one read) and publishes them in the global
 * shared memory as struct pn_sim_node_status (paranic/spec/sim.py NODE_STATUS, a seqlock):
 * `paranic cluster status` and pn_cluster_status() read them there. See docs/simulator.md
 * ("Status snapshot").
 */
#include <memory>

#include "harness.h"

size_t Harness::status_off()
{
	size_t off = PN_SIM_TRACE_OFF + (size_t)SIM_NODES * SIM_N_CTX * sizeof(pn_sim_trace);
	return (off + 255) & ~(size_t)255;   /* 256-byte aligned; clients read g->status_off */
}

pn_sim_node_status *Harness::status_rec(int n)
{
	return (pn_sim_node_status *)((uint8_t *)g + g->status_off + (size_t)n * g->status_stride);
}

void Harness::status_start()
{
	status_next.assign(SIM_NODES, cycle);
	status_pending.assign(SIM_NODES, false);
	status_due = cfg.status_period ? cycle : UINT64_MAX;
}

/* From step(): start the refreshes that are due. (A script queued with a future due
 * cycle would hold up the node's MMIO queue behind it, so refreshes are queued when due.) */
void Harness::status_tick()
{
	status_due = UINT64_MAX;
	for (int n = 0; n < SIM_NODES; n++) {
		if (status_pending[n])
			continue;
		if (status_next[n] <= cycle) {
			status_pending[n] = true;
			status_poll(n);
		} else if (status_next[n] < status_due) {
			status_due = status_next[n];
		}
	}
}

/* The CSR words of one refresh, in the order the done callback consumes them. */
static std::vector<uint32_t> status_addrs()
{
	std::vector<uint32_t> a;
	a.push_back(PN_CSR_NODE);
	a.push_back(PN_CSR_ID_DNA);          /* 64 bits: most significant word first */
	a.push_back(PN_CSR_ID_DNA + 4);
	a.push_back(PN_CSR_ID_CFG_NODE);
#define FW_ADDR(name, off, bits) a.push_back(off);
	PN_CSR_FW(FW_ADDR)
#undef FW_ADDR
#define LINK_ADDR(port, k, off) a.push_back(off);
	PN_CSR_LINK_STATUS(LINK_ADDR)
#undef LINK_ADDR
	return a;
}

void Harness::status_poll(int n)
{
	static const std::vector<uint32_t> addrs = status_addrs();
	auto vals = std::make_shared<std::vector<uint32_t>>();
	vals->reserve(addrs.size());
	for (size_t i = 0; i < addrs.size(); i++) {
		Script *s = new Script;
		s->background = true;
		s->csr_read(addrs[i]);
		bool last = i + 1 == addrs.size();
		s->done = [this, n, vals, last](Script &sc) {
			vals->push_back(sc.reads.empty() ? 0 : sc.reads[0]);
			if (!last)
				return;
			status_publish(n, *vals);
			status_pending[n] = false;
			status_next[n] = cycle + cfg.status_period;
			if (status_next[n] < status_due)
				status_due = status_next[n];
		};
		hosts[n]->push_script(s, cycle);
	}
}

void Harness::status_publish(int n, const std::vector<uint32_t> &v)
{
	pn_sim_node_status *st = status_rec(n);
	size_t i = 0;
	auto next = [&]() { return i < v.size() ? v[i++] : 0u; };
	uint64_t seq = st->seq;
	__atomic_store_n(&st->seq, seq + 1, __ATOMIC_RELAXED);   /* odd: being written */
	__atomic_thread_fence(__ATOMIC_RELEASE);
	st->node_id = next();
	uint64_t hi = next();
	st->dna = hi << 32 | next();
	st->cfg_node = next();
	unsigned j = 0;
#define FW_VAL(name, off, bits) if (j < PN_FW_REGS) st->fw[j++] = next();
	PN_CSR_FW(FW_VAL)
#undef FW_VAL
	uint32_t have = 0;
#define LINK_VAL(port, k, off) \
	do { \
		if ((port) < PN_SIM_STATUS_LINKS) \
			st->link[(k) * PN_SIM_STATUS_LINKS + (port)] = next(); \
		else \
			next(); \
		have |= 1u << (k); \
	} while (0);
	PN_CSR_LINK_STATUS(LINK_VAL)
#undef LINK_VAL
	st->have = have;
	st->n_links = PN_CSR_LINK_PORTS;
	st->cycle = cycle;
	__atomic_store_n(&st->seq, seq + 2, __ATOMIC_RELEASE);
}
