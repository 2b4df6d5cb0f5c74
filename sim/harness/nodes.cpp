/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * paranic-sim: the nodes' bring-up (node id, routing table, barrier unit), waiting
 * for the links, and a job's barrier set-up, as CSR scripts on each node's bus. See
 * docs/simulator.md ("Jobs and the barrier"). A SoC cluster (SIM_SOC) is brought up
 * by its firmware: the harness only waits for it ("SoC clusters").
 */
#include "harness.h"

#ifdef SIM_SOC
/* Firmware status registers: NicCore's fw_* CSRs (hw/mgmt.py). */
#define FW_STATE_OFF PN_CSR_FW_STATE
#define FW_FP_OFF PN_CSR_FW_FINGERPRINT
#endif

/* The barrier unit of a cluster of SIM_NODES nodes (the whole cluster is the first job). */
static void barrier_init(Script *s, uint32_t radix_log2, uint32_t mode)
{
	s->csr_write(PN_CSR_BARRIER_ENABLE, 1, 0);
	s->csr_write(PN_CSR_BARRIER_NODES, PN_CSR_BARRIER_NODES_SIZE, SIM_NODES);
	s->csr_write(PN_CSR_BARRIER_RADIX_LOG2, PN_CSR_BARRIER_RADIX_LOG2_SIZE, radix_log2);
	s->csr_write(PN_CSR_BARRIER_MODE, PN_CSR_BARRIER_MODE_SIZE, mode);
	s->csr_write(PN_CSR_BARRIER_ENABLE, 1, 1);
}

void Harness::bring_up()
{
	for (int n = 0; n < SIM_NODES; n++)
		node_id[n] = node_index[n] = n;
#ifdef SIM_SOC
	/* Firmware mode: no node ids, no routes; wait for the firmware. */
	for (int n = 0; n < SIM_NODES; n++)
		fw_poll(n, cycle);
	return;
#endif
	for (int n = 0; n < SIM_NODES; n++) {
		Script *s = new Script;
		s->csr_write(PN_CSR_NODE, PN_CSR_NODE_SIZE, (uint64_t)n);
		for (int d = 0; d < SIM_TABLE_NODES; d++) {
			s->csr_write(PN_CSR_ROUTER_ROUTE_ADR, PN_CSR_ROUTER_ROUTE_ADR_SIZE, (uint64_t)d);
			s->csr_write(PN_CSR_ROUTER_ROUTE_PORT, PN_CSR_ROUTER_ROUTE_PORT_SIZE, SIM_ROUTES[n][d]);
			s->csr_write(PN_CSR_ROUTER_ROUTE_WRITE, 1, 1);
		}
		barrier_init(s, cfg.radix_log2, barrier_mode(SIM_NODES));
		coll_init(s);
		hosts[n]->push_script(s, cycle);
		link_poll(n, cycle);
	}
}

/* Firmware mode: read node n's fw_state, fw_fingerprint and node id every 64 cycles
 * until every node is ROUTED or DEGRADED with one fingerprint (fw_routed), the firmware
 * reports ERROR, or --bringup-timeout cycles pass (both stop the simulator, status 4). */
void Harness::fw_poll(int n, uint64_t due)
{
#ifdef SIM_SOC
	Script *p = new Script;
	p->csr_read(FW_STATE_OFF);
	p->csr_read(FW_FP_OFF);
	p->csr_read(PN_CSR_NODE);
	p->done = [this, n](Script &sc) {
		if (fw_ready || stop)
			return;
		uint32_t st = sc.reads[0] & 0xff;
		if (st != fw_state_of[n])
			sim_log("node %d: fw_state %u at cycle %llu", n, st, (unsigned long long)(cycle - reset_cycle));
		fw_state_of[n] = st;
		fw_fp_of[n] = sc.reads[1];
		fw_node_of[n] = sc.reads[2];
		if (st == PN_FW_STATE_ERROR) {
			sim_log("node %d: the firmware reports ERROR at cycle %llu: bring-up failed", n,
				(unsigned long long)(cycle - reset_cycle));
			exit_status = 4;
			stop = 1;
			return;
		}
		if (cycle - reset_cycle > cfg.bringup_timeout) {
			sim_log("bring-up timeout: no routed cluster after %llu cycles", (unsigned long long)cfg.bringup_timeout);
			for (int k = 0; k < SIM_NODES; k++)
				sim_log("  node index %d: fw_state %u, fingerprint 0x%08x, node id %u", k, fw_state_of[k],
					fw_fp_of[k], fw_node_of[k]);
			exit_status = 4;
			stop = 1;
			return;
		}
		bool all = true;
		for (int k = 0; k < SIM_NODES; k++)
			all &= (fw_state_of[k] == PN_FW_STATE_ROUTED || fw_state_of[k] == PN_FW_STATE_DEGRADED) &&
			       fw_fp_of[k] == fw_fp_of[0];
		if (all)
			fw_routed();
		else
			fw_poll(n, cycle + 64);
	};
	hosts[n]->push_script(p, due);
#else
	(void)n;
	(void)due;
#endif
}

/* Every node's firmware reported a routed cluster: take the node ids it assigned (each
 * of 0 .. SIM_NODES-1 exactly once), set the barrier units up, then wait for the links. */
void Harness::fw_routed()
{
	fw_ready = true;
	bringup_cycles = cycle - reset_cycle;
	bool seen[SIM_NODES] = {};
	for (int n = 0; n < SIM_NODES; n++) {
		uint32_t id = fw_node_of[n];
		if (id >= SIM_NODES || seen[id]) {
			sim_log("node index %d: the firmware set node id %u: the simulator needs ids 0..%d, each once", n,
				id, SIM_NODES - 1);
			exit_status = 4;
			stop = 1;
			return;
		}
		seen[id] = true;
		node_id[n] = (int)id;
		node_index[id] = n;
	}
	sim_log("firmware brought the cluster up in %llu cycles (%.1f us): fingerprint 0x%08x", (unsigned long long)bringup_cycles,
		bringup_cycles * 1e6 / PN_TARGET_CLK_HZ, fw_fp_of[0]);
	for (int n = 0; n < SIM_NODES; n++) {
		sim_log("  node index %d: node id %d, fw_state %u", n, node_id[n], fw_state_of[n]);
		Script *s = new Script;
		barrier_init(s, cfg.radix_log2, barrier_mode(SIM_NODES));
		coll_init(s);
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
