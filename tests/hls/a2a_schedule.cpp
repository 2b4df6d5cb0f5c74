// SPDX-License-Identifier: BSD-2-Clause
/*
 * The all-to-all fold's schedule (collective.h: coll_a2a_pairs, coll_a2a_slots) checked by
 * brute force: for every member count 1..PN_COLL_A2A_MAX_NODES and vector of 1..32 words,
 * issue the combines slot by slot as try_complete_a2a's loop does and check that no combine
 * reads a partial fewer than `lat` slots after the combine that wrote it was issued (the
 * assumption behind its DEPENDENCE false), and that the combines are exactly the pairwise
 * tree's (nodes - 1 per word, every member used once); no slot without words; at most the
 * loop's LOOP_TRIPCOUNT (992) slots. Prints "ok", the cycles of a few
 * cases ("n dw cycles", slots + drain), or the first violation.
 */
#include <cstdio>

#include "collective.h"

static int check(unsigned n, unsigned dw, unsigned lat)
{
	static long issued[PN_COLL_A2A_MAX_NODES][PN_COLL_MAX_WORDS];
	static unsigned used[PN_COLL_A2A_MAX_NODES][PN_COLL_MAX_WORDS];
	for (unsigned m = 0; m < n; m++)
		for (unsigned w = 0; w < dw; w++)
			issued[m][w] = -(long)lat, used[m][w] = 0;
	long t = 0, combines = 0;
	for (unsigned lv = 0; lv < PN_COLL_A2A_LEVELS; lv++) {
		unsigned pairs = coll_a2a_pairs(n, lv), slots = coll_a2a_slots(n, lv, dw, lat), s = 1u << lv;
		if (slots < pairs * dw) {
			std::printf("n %u dw %u level %u: %u slots for %u combines\n", n, dw, lv, slots, pairs * dw);
			return 1;
		}
		for (unsigned k = 0; k < slots; k++, t++) {
			if (k >= pairs * dw)
				continue;
			unsigned p = k / dw, w = k % dw, i = p << (lv + 1), j = i + s;
			if (j >= n || t - issued[i][w] < (long)lat || t - issued[j][w] < (long)lat) {
				std::printf("n %u dw %u level %u slot %u: x%u, x%u not ready\n", n, dw, lv, k, i, j);
				return 1;
			}
			issued[i][w] = t;
			used[j][w]++;
			combines++;
		}
	}
	for (unsigned m = 1; m < n; m++)
		for (unsigned w = 0; w < dw; w++)
			if (used[m][w] != 1) {
				std::printf("n %u dw %u: x%u used %u times\n", n, dw, m, used[m][w]);
				return 1;
			}
	if (combines != (long)(n - 1) * dw || t != (long)coll_a2a_fold_slots(n, dw, lat)) {
		std::printf("n %u dw %u: %ld combines in %ld slots\n", n, dw, combines, t);
		return 1;
	}
	return 0;
}

int main()
{
	for (unsigned lat : {0u, 1u, (unsigned)PN_COLL_FADD_CYCLES, 9u})
		for (unsigned n = 1; n <= PN_COLL_A2A_MAX_NODES; n++) {
			if (coll_a2a_fold_slots(n, 0, lat) != 0) {
				std::printf("n %u dw 0: %u slots\n", n, coll_a2a_fold_slots(n, 0, lat));
				return 1;
			}
			for (unsigned dw = 1; dw <= PN_COLL_MAX_WORDS; dw++) {
				if (check(n, dw, lat))
					return 1;
				if (lat == PN_COLL_FADD_CYCLES && coll_a2a_fold_slots(n, dw, lat) > 992) {
					std::printf("n %u dw %u: more slots than the loop's LOOP_TRIPCOUNT\n", n, dw);
					return 1;
				}
			}
		}
	std::printf("ok\n");
	for (unsigned n : {2u, 4u, 8u, 16u, 32u})
		for (unsigned dw : {1u, 8u, 32u})
			std::printf("%u %u %u\n", n, dw, coll_a2a_fold_slots(n, dw, PN_COLL_FADD_CYCLES) + PN_COLL_FADD_CYCLES);
	return 0;
}
