/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * paranic-sim: lock-step windows (`--window W`, split builds; docs/simulator.md,
 * "Windows"). Conservative synchronisation with the cable as lookahead: a word a node's
 * cable head drives in cycle t reaches the far node in cycle t + SIM_PHY_DELAY, so in a
 * window of at most SIM_PHY_DELAY cycles no node sees anything another node does in the
 * same window. Each thread (a lane) then runs its nodes one after the other through the
 * whole window, each cycle of a node being its host's pre, its collective kernel, the
 * falling edge, the host's post, the kernel's, the rising edge: the model's state of one
 * node stays in the cache for W cycles, and the threads meet once per window instead of
 * twice per cycle.
 *
 * What is global stays on the harness's thread, at the windows' boundaries: the pause,
 * faults, the clients' queues (a client's operation is taken at a boundary), the
 * published clock, status refreshes, answers to loads, the sockets. The window ends
 * early at every cycle something of these is due that is known when it starts (a fault,
 * a status refresh, an answer, the pause a DMA write may owe), so these happen at the
 * serial run's cycles; while a script (bring-up, context set-up, a status refresh, ...)
 * is queued or runs on any node the clock goes cycle by cycle, since scripts' callbacks
 * are the harness's own code.
 */
#include <algorithm>

#include "Vcluster.h"
#include "evalpool.h"
#include "harness.h"

thread_local Lane *sim_lane = nullptr;

#ifdef SIM_SPLIT

/* The cycles the next window may run, starting at `cycle`, ending at most at `limit`:
 * 1 when something on the harness's thread must run cycle by cycle. */
uint64_t Harness::window_len(uint64_t limit)
{
	if (job_pending || !ctx_waiting.empty())
		return 1;
	uint64_t end = std::min(cycle + cfg.window, limit);
	for (const Host *h : hosts) {
		if (h->has_script())
			return 1;
		end = std::min(end, h->window_bound());
	}
	for (const Client *cl : clients)
		if (cl->st == CState::Config || cl->st == CState::Teardown)
			return 1;
	end = std::min(end, pause_at);
	end = std::min(end, status_due);
	if (!fault_queue.empty())
		end = std::min(end, fault_queue.front().at);
	for (const Reply &r : replies)
		end = std::min(end, r.due);
	if (cfg.max_cycles)
		end = std::min(end, cfg.max_cycles);
	return end > cycle + 1 ? end - cycle : 1;
}

void Harness::lane_entry(void *arg, int t)
{
	static_cast<Harness *>(arg)->lane_run(t);
}

/* Lane t: nodes t, t + lanes, ... each through the whole window. */
void Harness::lane_run(int t)
{
	Lane &L = lanes[t];
	sim_lane = &L;
	const int nl = (int)lanes.size();
	for (int n = t; n < SIM_NODES; n += nl) {
		Host *h = hosts[n];
		for (uint64_t i = 0; i < win_w; i++) {
			uint64_t c = win_c0 + i;
			L.cycle = c;
			h->pre(c);
			coll_node(n, false, c);
			m->node_fall(n, win_e0 + i);
			h->post(c);
			coll_node(n, true, c);
			if (m->node_rise(n, win_e0 + i))
				L.link_activity = std::max(L.link_activity, c + 1);
		}
	}
	sim_lane = nullptr;
}

void Harness::window_run(uint64_t w)
{
	win_c0 = cycle;
	win_w = w;
	win_e0 = m->edges();
	if (sim_eval_pool && lanes.size() > 1)
		sim_eval_pool->run((int)lanes.size(), lane_entry, this);
	else
		for (size_t t = 0; t < lanes.size(); t++)
			lane_run((int)t);
	m->advance(w);
	cycle += w;
	windows++;
	window_cycles += w;
	for (Lane &L : lanes) {
		pause_at = std::min(pause_at, L.pause_at);
		L.pause_at = UINT64_MAX;
		if (!L.replies.empty()) {
			replies.insert(replies.end(), L.replies.begin(), L.replies.end());
			L.replies.clear();
		}
		if (L.link_activity && cfg.link_activity)
			last_activity = std::max(last_activity, L.link_activity);
		L.link_activity = 0;
	}
	step_end();
}

void Harness::advance(uint64_t limit)
{
	if (!cfg.window) {
		step();
		return;
	}
	step_begin();
	uint64_t w = window_len(limit);
	if (w <= 1)
		step_cycle();
	else
		window_run(w);
}

#else

void Harness::advance(uint64_t) { step(); }
uint64_t Harness::window_len(uint64_t) { return 1; }
void Harness::window_run(uint64_t) {}
void Harness::lane_entry(void *, int) {}
void Harness::lane_run(int) {}

#endif
