// SPDX-License-Identifier: BSD-2-Clause
/* paranic-sim: how a thread waits for another (the worker threads, evalpool.cpp, and the
 * lock-step windows' lanes, window.cpp): spin SPIN_ROUNDS rounds of a pause instruction
 * (~10-40 ns each), then sleep on a futex, so an idle simulator keeps no core busy. */
#ifndef PN_SIM_SPIN_H
#define PN_SIM_SPIN_H

#include <atomic>
#include <climits>
#include <cstdint>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#define SPIN_ROUNDS 4000

static inline void cpu_relax()
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	asm volatile("yield");
#endif
}

/* Sleep while *addr == val (returns at once when it differs, or on a wake-up). */
static inline void futex_wait(std::atomic<uint32_t> *addr, uint32_t val)
{
	syscall(SYS_futex, reinterpret_cast<uint32_t *>(addr), FUTEX_WAIT_PRIVATE, val, nullptr, nullptr, 0);
}

static inline void futex_wake_all(std::atomic<uint32_t> *addr)
{
	syscall(SYS_futex, reinterpret_cast<uint32_t *>(addr), FUTEX_WAKE_PRIVATE, INT_MAX, nullptr, nullptr, 0);
}

#endif
