// SPDX-License-Identifier: BSD-2-Clause
/*
 * paranic-sim: worker threads that evaluate the node models of a split cluster side by
 * side (docs/simulator.md, "Worker threads"). The caller's thread is one of the pool's
 * threads: run() hands every thread its share of the nodes, does its own share and
 * returns when all are done, so the models are evaluated in parallel between two points
 * at which the harness's single thread drives their inputs and reads their outputs.
 *
 * A waiting worker spins for a while (a cycle's host work between two evaluations is
 * short), then sleeps on a futex, so an idle simulator does not keep a core busy; the
 * caller waiting for the workers does the same.
 */
#ifndef PARANIC_SIM_EVALPOOL_H
#define PARANIC_SIM_EVALPOOL_H

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

class EvalPool {
public:
	typedef void (*Fn)(void *arg, int i);

	/* threads >= 2: the caller plus threads - 1 workers. */
	explicit EvalPool(int threads);
	~EvalPool();
	EvalPool(const EvalPool &) = delete;
	EvalPool &operator=(const EvalPool &) = delete;

	int threads() const { return nthreads; }
	/* fn(arg, i) for every i in [0, n): thread t takes t, t + threads, ...; returns when
	 * every call has returned. */
	void run(int n, Fn fn, void *arg);

	/* Statistics: calls of run(), and how often a worker had to be woken from sleep. */
	uint64_t runs = 0;
	std::atomic<uint64_t> wakeups{0};

private:
	void worker(int t);
	void share(int t);

	int nthreads;
	std::vector<std::thread> workers;
	std::atomic<uint32_t> gen{0};        /* bumped by run(): a new share for every worker */
	std::atomic<uint32_t> pending{0};    /* workers not yet done with this generation */
	std::atomic<uint32_t> caller_sleeping{0};   /* run() waits for them on a futex */
	std::atomic<int> sleepers{0};        /* workers asleep on `gen` */
	std::atomic<bool> quit{false};
	int n = 0;
	Fn fn = nullptr;
	void *arg = nullptr;
};

#endif
