/* SPDX-License-Identifier: BSD-2-Clause */
/* Helpers shared by libparanic's C test programs (one process per node, started by
 * pn_launch). Output: one line per result, "ok CASE ..." or "FAIL CASE: ...". */
#ifndef PN_TUTIL_H
#define PN_TUTIL_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *t_case __attribute__((unused)) = "setup";
static int t_failures __attribute__((unused));

#define say(...)                               \
	do {                                   \
		printf(__VA_ARGS__);           \
		fputc('\n', stdout);           \
		fflush(stdout);                \
	} while (0)

/* Inside a case function returning int: report and return -1 when cond is false. */
#define CHECK(cond, fmt, ...)                                                                       \
	do {                                                                                        \
		if (!(cond)) {                                                                      \
			say("FAIL %s: " fmt " [%s:%d: %s]", t_case, ##__VA_ARGS__, __FILE__, __LINE__, \
			    #cond);                                                                 \
			t_failures++;                                                               \
			return -1;                                                                  \
		}                                                                                   \
	} while (0)

/* A call that must return exactly `want`. */
#define EXPECT_RC(call, want)                                                                      \
	do {                                                                                       \
		long rc_ = (long)(call);                                                           \
		CHECK(rc_ == (long)(want), "%s returned %ld, expected %ld", #call, rc_, (long)(want)); \
	} while (0)

static inline uint64_t t_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline void t_sleep_us(long us)
{
	struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
	nanosleep(&ts, NULL);
}

/* Deterministic test pattern: byte `off` of the stream `seed`. */
static inline uint32_t t_mix(uint32_t x)
{
	x ^= x >> 16;
	x *= 0x7feb352dU;
	x ^= x >> 15;
	x *= 0x846ca68bU;
	x ^= x >> 16;
	return x;
}

static inline void pat_fill(void *buf, size_t len, uint32_t seed, size_t base)
{
	uint8_t *p = buf;
	for (size_t i = 0; i < len; i++) {
		size_t off = base + i;
		p[i] = (uint8_t)(t_mix(seed * 0x9e3779b9U + (uint32_t)(off >> 2)) >> (8 * (off & 3)));
	}
}

/* Index of the first wrong byte, or (size_t)-1 when all match. */
static inline size_t pat_check(const void *buf, size_t len, uint32_t seed, size_t base)
{
	const uint8_t *p = buf;
	for (size_t i = 0; i < len; i++) {
		size_t off = base + i;
		if (p[i] != (uint8_t)(t_mix(seed * 0x9e3779b9U + (uint32_t)(off >> 2)) >> (8 * (off & 3))))
			return i;
	}
	return (size_t)-1;
}

static inline long t_env_long(const char *name, long dflt)
{
	const char *s = getenv(name);
	return s && *s ? strtol(s, NULL, 0) : dflt;
}

#endif /* PN_TUTIL_H */
