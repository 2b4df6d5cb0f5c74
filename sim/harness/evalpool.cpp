// SPDX-License-Identifier: BSD-2-Clause
/* paranic-sim: worker threads for a split cluster's node models (evalpool.h). */
#include "evalpool.h"

#include "spin.h"

EvalPool::EvalPool(int threads) : nthreads(threads < 1 ? 1 : threads)
{
	for (int t = 1; t < nthreads; t++)
		workers.emplace_back(&EvalPool::worker, this, t);
}

EvalPool::~EvalPool()
{
	quit.store(true, std::memory_order_release);
	gen.fetch_add(1, std::memory_order_acq_rel);
	futex_wake_all(&gen);
	for (std::thread &w : workers)
		w.join();
}

void EvalPool::share(int t)
{
	for (int i = t; i < n; i += nthreads)
		fn(arg, i);
}

void EvalPool::run(int count, Fn f, void *a)
{
	runs++;
	if (nthreads == 1) {
		for (int i = 0; i < count; i++)
			f(a, i);
		return;
	}
	n = count;
	fn = f;
	arg = a;
	pending.store((uint32_t)(nthreads - 1), std::memory_order_relaxed);
	/* Sequentially consistent, as the worker's sleepers/gen pair: either a worker going
	 * to sleep is counted here, or it sees the new generation and does not sleep. */
	gen.fetch_add(1);   /* publishes n, fn, arg */
	if (sleepers.load() > 0)
		futex_wake_all(&gen);
	share(0);
	/* Spin, then sleep until the last worker wakes this thread: a worker that lost its
	 * core (a loaded machine) gets it back sooner than with this thread yielding in a
	 * loop, and this thread burns no CPU meanwhile. */
	uint32_t left;
	for (unsigned k = 0; (left = pending.load(std::memory_order_acquire)) != 0; k++) {
		if (k < SPIN_ROUNDS) {
			cpu_relax();
			continue;
		}
		caller_sleeping.store(1);   /* sequentially consistent with the workers' fetch_sub */
		if ((left = pending.load()) != 0)
			futex_wait(&pending, left);
		caller_sleeping.store(0, std::memory_order_relaxed);
	}
}

void EvalPool::worker(int t)
{
	uint32_t seen = 0;   /* gen's first value: run() may bump it before this thread starts */
	for (;;) {
		uint32_t g;
		unsigned k = 0;
		while ((g = gen.load(std::memory_order_acquire)) == seen) {
			if (++k < SPIN_ROUNDS) {
				cpu_relax();
				continue;
			}
			sleepers.fetch_add(1);
			if (gen.load() == seen) {
				futex_wait(&gen, seen);
				wakeups.fetch_add(1, std::memory_order_relaxed);
			}
			sleepers.fetch_sub(1, std::memory_order_acq_rel);
			k = 0;
		}
		seen = g;
		if (quit.load(std::memory_order_acquire))
			return;
		share(t);
		if (pending.fetch_sub(1) == 1 && caller_sleeping.load())
			futex_wake_all(&pending);
	}
}
