/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * paranic-sim: the pause, which keeps simulated time independent of machine load.
 *
 * When the harness makes something visible to a client (an RX valid word, a status-block
 * write, the answer to an MMIO read), it notes the cycle and the client's poll counter
 * (pn_sim_ctl.c_polls, bumped by libparanic's sim backend after every look at host
 * memory that found nothing new, hal_sim.c: sim_looked). The clock then runs at most
 * `pause_grace` cycles further; beyond that it waits until the counter (or the client's
 * queue head: it pushed work, so it has looked) has moved. A client waiting for a CPU
 * thus costs at most the grace in simulated time, whatever the load.
 *
 * Only clients that poll are waited for: one whose counter never moved (no sim backend
 * of this version, a QEMU device client) or that did not look within `pause_cap_ms` of
 * wall time (it computes, sleeps or was stopped) is left alone until its counter moves
 * again, so it can delay the cluster by one cap at most. See docs/simulator.md, "The clock".
 *
 * The work clock (pn_sim_global.work_ns), which libparanic's own deadlines read on the
 * sim backend instead of the wall clock: the harness thread's CPU time plus the wall
 * time it slept with nothing to do. Neither a pause nor a wait for a CPU advances it, so
 * a loaded machine stretches the deadlines as much as it slows the cluster down, while a
 * cluster that has nothing in flight (a peer that died, a link DOWN) still reaches them.
 */
#include <algorithm>
#include <ctime>

#include <sched.h>

#include "harness.h"

static double pause_now()
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint64_t clock_ns(clockid_t id)
{
	struct timespec ts;
	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t polls_of(const Client *cl)
{
	return __atomic_load_n(&cl->ctl->c_polls, __ATOMIC_ACQUIRE);
}

static uint64_t qhead_of(const Client *cl)
{
	return __atomic_load_n(&cl->ctl->q_head, __ATOMIC_ACQUIRE);
}

/* Something became visible to cl this cycle. */
void Harness::owe(Client *cl)
{
	if (cfg.pause_cap_ms <= 0 || cl->device || !cl->ctl || cl->owed_cycle != UINT64_MAX)
		return;   /* disabled, not a polling library, or already owed since an earlier cycle */
	uint64_t polls = polls_of(cl);
	if (polls == cl->polls_capped)
		return;   /* never polled, or stopped polling (the cap ended its last pause) */
	/* In a window the client's node runs on a lane: its cycle, and the lane's pause_at
	 * (the harness's thread takes the earliest at the window's end; window.cpp). */
	uint64_t cyc = now();
	cl->owed_cycle = cyc;
	cl->owed_polls = polls;
	cl->owed_qhead = qhead_of(cl);
	uint64_t &at = sim_lane ? sim_lane->pause_at : pause_at;
	at = std::min(at, cyc + cfg.pause_grace);
}

/* Drop the clients that have looked; pause_at = the earliest grace end that remains.
 * True when the clock must wait now. */
bool Harness::pause_scan()
{
	uint64_t at = UINT64_MAX;
	for (Client *cl : clients) {
		if (cl->owed_cycle == UINT64_MAX)
			continue;
		if (cl->st != CState::Active || polls_of(cl) != cl->owed_polls || qhead_of(cl) != cl->owed_qhead) {
			cl->owed_cycle = UINT64_MAX;
			continue;
		}
		at = std::min(at, cl->owed_cycle + cfg.pause_grace);
	}
	pause_at = at;
	return cycle >= at;
}

void Harness::pause_wait()
{
	if (!pause_scan())
		return;
	store64(&g->pauses, g->pauses + 1);
	double t0 = pause_now(), cap = cfg.pause_cap_ms * 1e-3;
	for (uint32_t n = 1;; n++) {
		/* Spin briefly (the client usually is running), then sleep: on a loaded machine the
		 * client needs the CPU this thread would burn. */
		if (n < 64) {
#if defined(__x86_64__) || defined(__i386__)
			__builtin_ia32_pause();
#endif
		} else if (n < 128) {
			sched_yield();
		} else {
			struct timespec ts = {0, 20000};
			nanosleep(&ts, nullptr);
		}
		/* A client that exited hangs up: notice it now (its teardown must not wait for the
		 * cap), as the run loop does between steps. */
		if ((n & 15) == 0)
			poll_sockets(0);
		if (!pause_scan() || stop)
			break;
		if ((n & 15) == 0 && pause_now() - t0 >= cap) {
			/* It did not look: stop waiting for it until it polls again. */
			for (Client *cl : clients)
				if (cl->owed_cycle != UINT64_MAX && cycle >= cl->owed_cycle + cfg.pause_grace) {
					cl->polls_capped = polls_of(cl);
					cl->owed_cycle = UINT64_MAX;
					store64(&g->pause_caps, g->pause_caps + 1);
					if (sim_verbose)
						sim_log("client %llu (pid %d) did not look within %.1f ms: not waited for "
							"until it polls again", (unsigned long long)cl->id, cl->pid,
							cfg.pause_cap_ms);
				}
			pause_scan();
			break;
		}
	}
	pause_wall += pause_now() - t0;
}

/* ---- the work clock ---------------------------------------------------------------------- */

void Harness::idle_sockets(int timeout_ms)
{
	uint64_t t0 = clock_ns(CLOCK_MONOTONIC);
	poll_sockets(timeout_ms);
	idle_ns += clock_ns(CLOCK_MONOTONIC) - t0;
}

void Harness::work_tick()
{
	store64(&g->work_ns, clock_ns(CLOCK_THREAD_CPUTIME_ID) + idle_ns);
}
