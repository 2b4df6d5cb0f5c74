/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Active messages' wire header (am_wire.h, used by am_msg.c and am_rma.c): paw_parse on a
 * received message (a heap block of exactly its length) and paw_range_ok on the RMA
 * offsets a request names.
 *
 * Input: [region length 8][message bytes ...].
 */
#include "fuzz.h"
#include "am_wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *d = data;
	size_t n = size;
	uint64_t region = fuzz_take(&d, &n, 8);
	uint8_t *buf = fuzz_dup(d, n);
	struct paw_hdr h;
	uint64_t args[PAW_MAX_ARGS];
	const uint8_t *payload = NULL;

	if (paw_parse(buf, n, &h, args, &payload) == 0) {
		FUZZ_ASSERT(h.nargs <= PAW_MAX_ARGS);
		FUZZ_ASSERT(payload >= buf + sizeof(h) && payload + h.len == buf + n);
		fuzz_touch(payload, h.len);
		fuzz_touch(args, 8u * h.nargs);
		if (h.nargs >= 3) {
			uint64_t off = args[PAW_A_OFF], len = args[PAW_A_LEN];
			if (paw_range_ok(off, len, region))
				FUZZ_ASSERT(off <= region && off + len <= region && off + len >= off);
			else
				FUZZ_ASSERT(off > region || len > region - off);
		}
	} else {
		FUZZ_ASSERT(n < sizeof(h) || h.nargs > PAW_MAX_ARGS || sizeof(h) + 8u * h.nargs + h.len != n);
	}
	free(buf);
	return 0;
}
