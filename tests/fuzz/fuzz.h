/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Shared by the libFuzzer harnesses of tests/fuzz (README in tests/fuzz/Makefile and
 * docs/reliability.md, "Fuzzing"): each fuzz_<parser>.c calls libparanic's own parsing
 * function on the input and checks what it promised (built with ASan and UBSan, so any
 * read outside the input is a crash too).
 */
#ifndef PN_FUZZ_H
#define PN_FUZZ_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A promise of the parser broken: a crash libFuzzer records. */
#define FUZZ_ASSERT(c)                                                                        \
	do {                                                                                  \
		if (!(c)) {                                                                   \
			fprintf(stderr, "%s:%d: broken promise: %s\n", __FILE__, __LINE__, #c); \
			abort();                                                              \
		}                                                                             \
	} while (0)

/* A copy of n input bytes in a heap block of exactly n bytes (NULL for n == 0), so that
 * ASan sees any read past the end. */
static inline uint8_t *fuzz_dup(const uint8_t *d, size_t n)
{
	uint8_t *p;
	if (!n)
		return NULL;
	p = malloc(n);
	if (!p)
		abort();
	memcpy(p, d, n);
	return p;
}

/* Read every byte of [p, p + n): ASan reports any byte outside its block. */
static inline unsigned fuzz_touch(const void *p, size_t n)
{
	const volatile uint8_t *b = p;
	unsigned s = 0;
	for (size_t i = 0; i < n; i++)
		s += b[i];
	return s;
}

/* Take a little-endian field of the input (zeros past its end). */
static inline uint64_t fuzz_take(const uint8_t **d, size_t *n, size_t bytes)
{
	uint64_t v = 0;
	for (size_t i = 0; i < bytes; i++) {
		if (*n) {
			v |= (uint64_t)(*d)[0] << (8 * i);
			(*d)++;
			(*n)--;
		}
	}
	return v;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#endif /* PN_FUZZ_H */
