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
 * A node's clients' queues are taken on its lane every cycle (pull_client), except in a
 * window's first cycle and an entry that needs the harness's thread (held to the end).
 * What is global stays on the harness's thread, at the windows' boundaries: the pause,
 * faults, the published clock, status refreshes, answers to loads, the sockets. The window ends
 * early at every cycle something of these is due that is known when it starts (a fault,
 * a status refresh, an answer, the pause a DMA write may owe), so these happen at the
 * serial run's cycles; while a script (bring-up, context set-up, a status refresh, ...)
 * is queued or runs on any node the clock goes cycle by cycle, since scripts' callbacks
 * are the harness's own code.
 */
#include <algorithm>

#include "Vcluster.h"
#include "harness.h"
#include "spin.h"

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

void Harness::window_start()
{
	lanes.resize(cfg.threads);
	for (uint32_t t = 1; t < cfg.threads; t++)
		lane_threads.emplace_back(&Harness::lane_worker, this, (int)t);
}

void Harness::window_stop()
{
	win_quit.store(true);
	win_seq.fetch_add(1);
	futex_wake_all(&win_seq);
	for (std::thread &th : lane_threads)
		th.join();
	lane_threads.clear();
}

/* One node through the whole window, on lane L. */
void Harness::node_window(Lane &L, int n)
{
	Host *h = hosts[n];
	for (uint64_t i = 0; i < win_w; i++) {
		uint64_t c = win_c0 + i;
		L.cycle = c;
		if (i)   /* cycle win_c0's entries were taken by the harness's thread */
			for (Client *cl : win_clients[n])
				if (!cl->win_held && !pull_client(cl))
					cl->win_held = true;
		h->pre(c);
		coll_node(n, false, c);
		m->node_fall(n, win_e0 + i);
		h->post(c);
		coll_node(n, true, c);
		if (m->node_rise(n, win_e0 + i))
			L.link_activity = std::max(L.link_activity, c + 1);
	}
}

/* Lane t in window `id`: its own nodes first (t, t + lanes, ...: they stay in its core's
 * cache from one window to the next), then any node no lane has taken yet. A thread the
 * scheduler parks (a loaded machine) thus holds a window up by the node it is running at
 * most: the others take the rest, and the window ends when every node has run, without
 * waiting for a thread that took none. A late thread's claims for a window that is over
 * fail (win_taken[n] has moved on), so it never runs a node with another window's
 * parameters: they change only once every node of the window has run. */
void Harness::lane_run(int t, uint64_t id)
{
	Lane &L = lanes[t];
	sim_lane = &L;
	const int nl = (int)lanes.size();
	auto take = [&](int n) {
		uint64_t want = id - 1;
		return win_taken[n].load(std::memory_order_relaxed) == want &&
		       win_taken[n].compare_exchange_strong(want, id, std::memory_order_acq_rel);
	};
	auto run = [&](int n, bool stolen) {
		node_window(L, n);
		if (stolen)
			win_stolen.fetch_add(1, std::memory_order_relaxed);
		win_done.fetch_add(1);   /* sequentially consistent with win_caller_sleeps */
		if (t && win_caller_sleeps.load())
			futex_wake_all(&win_done);
	};
	for (int n = t; n < SIM_NODES; n += nl)
		if (take(n))
			run(n, false);
	for (int k = 1; k < SIM_NODES && nl > 1; k++) {
		int n = (t + k) % SIM_NODES;
		if (n % nl != t && take(n))
			run(n, true);
	}
	sim_lane = nullptr;
}

void Harness::lane_worker(int t)
{
	uint32_t seen = 0;
	for (;;) {
		uint32_t s;
		unsigned k = 0;
		while ((s = win_seq.load(std::memory_order_acquire)) == seen) {
			if (++k < SPIN_ROUNDS) {
				cpu_relax();
				continue;
			}
			win_sleepers.fetch_add(1);
			if (win_seq.load() == seen) {
				futex_wait(&win_seq, seen);
				win_wakeups.fetch_add(1, std::memory_order_relaxed);
			}
			win_sleepers.fetch_sub(1);
			k = 0;
		}
		seen = s;
		if (win_quit.load())
			return;
		lane_run(t, win_id.load(std::memory_order_acquire));
	}
}

void Harness::window_run(uint64_t w)
{
	win_c0 = cycle;
	win_w = w;
	win_e0 = m->edges();
	for (std::vector<Client *> &v : win_clients)
		v.clear();
	for (Client *cl : clients)
		if (cl->st == CState::Active && cl->node >= 0 && cl->node < SIM_NODES) {
			cl->win_held = false;
			win_clients[cl->node].push_back(cl);
		}
	uint64_t id = win_id.load(std::memory_order_relaxed) + 1;
	uint32_t target = win_done.load(std::memory_order_relaxed) + SIM_NODES;
	win_id.store(id, std::memory_order_release);   /* publishes the window's parameters */
	if (!lane_threads.empty()) {
		win_seq.fetch_add(1);   /* sequentially consistent with the workers' sleepers/seq pair */
		if (win_sleepers.load() > 0)
			futex_wake_all(&win_seq);
	}
	lane_run(0, id);
	/* Wait for the nodes other lanes are running (spin, then sleep until the last wakes us). */
	uint32_t d;
	for (unsigned k = 0; (d = win_done.load(std::memory_order_acquire)) != target; k++) {
		if (k < SPIN_ROUNDS) {
			cpu_relax();
			continue;
		}
		win_caller_sleeps.store(1);
		if ((d = win_done.load()) != target)
			futex_wait(&win_done, d);
		win_caller_sleeps.store(0);
	}
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
		last_activity = std::max(last_activity, L.activity);
		L.link_activity = L.activity = 0;
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
void Harness::window_start() {}
void Harness::window_stop() {}
void Harness::lane_worker(int) {}
void Harness::lane_run(int, uint64_t) {}
void Harness::node_window(Lane &, int) {}

#endif
