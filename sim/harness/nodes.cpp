/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * paranic-sim: the nodes' bring-up (node id, routing table, barrier unit), waiting
 * for the links, and a job's barrier set-up, as CSR scripts on each node's bus. See
 * docs/simulator.md ("Jobs and the barrier").
 */
#include "harness.h"

void Harness::bring_up()
{
	for (int n = 0; n < SIM_NODES; n++) {
		Script *s = new Script;
		s->csr_write(PN_CSR_NODE, PN_CSR_NODE_SIZE, (uint64_t)n);
		for (int d = 0; d < SIM_TABLE_NODES; d++) {
			s->csr_write(PN_CSR_ROUTER_ROUTE_ADR, PN_CSR_ROUTER_ROUTE_ADR_SIZE, (uint64_t)d);
			s->csr_write(PN_CSR_ROUTER_ROUTE_PORT, PN_CSR_ROUTER_ROUTE_PORT_SIZE, SIM_ROUTES[n][d]);
			s->csr_write(PN_CSR_ROUTER_ROUTE_WRITE, 1, 1);
		}
		s->csr_write(PN_CSR_BARRIER_ENABLE, 1, 0);
		s->csr_write(PN_CSR_BARRIER_NODES, PN_CSR_BARRIER_NODES_SIZE, SIM_NODES);
		s->csr_write(PN_CSR_BARRIER_RADIX_LOG2, PN_CSR_BARRIER_RADIX_LOG2_SIZE, cfg.radix_log2);
		s->csr_write(PN_CSR_BARRIER_MODE, PN_CSR_BARRIER_MODE_SIZE, barrier_mode(SIM_NODES));
		s->csr_write(PN_CSR_BARRIER_ENABLE, 1, 1);
		hosts[n]->push_script(s, cycle);
		link_poll(n, cycle);
	}
}

/* Read every link port's state until all are up (links train by themselves). */
void Harness::link_poll(int n, uint64_t due)
{
	Script *p = new Script;
#define LINK_STATE_READ(port, csr) p->csr_read(csr);
	PN_CSR_LINK_STATES(LINK_STATE_READ)
#undef LINK_STATE_READ
	p->done = [this, n](Script &sc) {
		bool up = sc.reads.size() == PN_CSR_LINK_PORTS;
		for (size_t i = 0; i < sc.reads.size(); i++)   /* a cut cable's ports do not count */
			up &= sc.reads[i] == PN_LINK_STATE_UP || cable_cut_at(n, (int)i + 1);
		if (!up) {
			link_poll(n, cycle + 64);
			return;
		}
		if (sim_verbose)
			sim_log("node %d: links up at cycle %llu", n, (unsigned long long)cycle);
		if (++nodes_up == SIM_NODES) {
			links_up = true;
			write_ready();
		}
	};
	hosts[n]->push_script(p, due);
}

/* The barrier mode for a job of n nodes (hw/barrier.py): all-to-all arrives up to
 * --barrier-a2a-max nodes (one network diameter per episode), the combining tree above
 * (fewer packets per node). */
uint32_t Harness::barrier_mode(int n) const
{
	return (uint32_t)n <= cfg.barrier_a2a_max ? 1u : 0u;
}

/* A new job: the barrier spans nodes 0 .. n-1. Disable every node's barrier unit,
 * then set the size and mode and enable them all (hw/barrier.py: change `nodes` and
 * `mode` only with every node disabled; all count episodes from 0 together). */
void Harness::start_job(int n)
{
	job_want = n;
	job_pending = SIM_NODES;
	for (int k = 0; k < SIM_NODES; k++) {
		Script *s = new Script;
		s->csr_write(PN_CSR_BARRIER_ENABLE, 1, 0);
		s->done = [this, n](Script &) {
			if (--job_pending)
				return;
			job_pending = SIM_NODES;
			for (int j = 0; j < SIM_NODES; j++) {
				Script *t = new Script;
				t->csr_write(PN_CSR_BARRIER_NODES, PN_CSR_BARRIER_NODES_SIZE, (uint64_t)n);
				t->csr_write(PN_CSR_BARRIER_RADIX_LOG2, PN_CSR_BARRIER_RADIX_LOG2_SIZE, cfg.radix_log2);
				t->csr_write(PN_CSR_BARRIER_MODE, PN_CSR_BARRIER_MODE_SIZE, barrier_mode(n));
				t->csr_write(PN_CSR_BARRIER_ENABLE, 1, 1);
				t->done = [this, n](Script &) {
					if (--job_pending)
						return;
					job_nodes = n;
					job_want = 0;
					g->job_nodes = (uint64_t)n;
					sim_log("job of %d nodes (barrier %s over nodes 0..%d) at cycle %llu", n,
						barrier_mode(n) ? "all-to-all" : "tree", n - 1, (unsigned long long)cycle);
					for (Client *c : std::vector<Client *>(clients))
						if (c->st == CState::Waiting)
							try_attach(c);
				};
				hosts[j]->push_script(t, cycle + cfg.c_mmio_w);
			}
		};
		hosts[k]->push_script(s, cycle + cfg.c_mmio_w);
	}
}
