/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The client's side of the simulator's attach protocol (sim_proto.c, used by hal_sim.c):
 * the welcome (pn_sim_check_welcome) and the global shared memory it names
 * (pn_sim_check_global). The global memory is a heap block of exactly the bytes the
 * input gives it: what the check accepts, the client reads (every trace and node
 * status record) without leaving it, and it never divides by a zero clock.
 *
 * Input: [welcome length][welcome ...][global shm ...].
 */
#include <errno.h>

#include "fuzz.h"
#include "paranic/pn_protocol.h"
#include "pn_sim_proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *d = data;
	size_t n = size;
	size_t wlen = (size_t)fuzz_take(&d, &n, 1);
	struct pn_sim_welcome w;
	uint8_t *g;
	int r;

	if (wlen > n)
		wlen = n;
	memset(&w, 0, sizeof(w));
	memcpy(&w, d, wlen < sizeof(w) ? wlen : sizeof(w));
	d += wlen;
	n -= wlen;
	r = pn_sim_check_welcome(&w, wlen, PN_MAX_MTU);
	FUZZ_ASSERT(r <= 0 && r >= -4095);
	if (r == 0) {
		FUZZ_ASSERT(wlen == sizeof(w) && w.status == 0);
		FUZZ_ASSERT(w.mtu >= 8 && w.mtu <= PN_MAX_MTU && w.ctx < w.n_ctx && w.n_ctx <= PN_MAX_CONTEXTS);
		FUZZ_ASSERT(w.node < w.nodes && w.nodes <= w.sim_nodes && w.sim_nodes <= PN_MAX_NODES);
		FUZZ_ASSERT(w.global_bytes >= sizeof(struct pn_sim_global));
	} else if (wlen == sizeof(w) && w.magic == PN_SIM_MAGIC_WELCOME && w.version == PN_SIM_VERSION && w.status < 0 &&
		   w.status >= -4095) {
		FUZZ_ASSERT(r == w.status);   /* a refusal reaches the caller as it was given */
	}

	g = fuzz_dup(d, n);
	if (pn_sim_check_global((const struct pn_sim_global *)g, n) == 0) {
		struct pn_sim_global h;
		memcpy(&h, g, sizeof(h));
		FUZZ_ASSERT(h.clk_hz && h.nodes && h.n_ctx);
		/* The client's reads (pn_sim_trace, pn_sim_info, pn_cluster_status). */
		for (uint32_t node = 0; node < h.nodes; node += h.nodes - 1 ? h.nodes - 1 : 1)
			for (uint32_t c = 0; c < h.n_ctx; c += h.n_ctx - 1 ? h.n_ctx - 1 : 1)
				fuzz_touch(g + h.trace_off + ((size_t)node * h.n_ctx + c) * h.trace_stride,
					   sizeof(struct pn_sim_trace));
		if (h.status_off && h.status_stride && h.status_period)
			fuzz_touch(g + h.status_off + (size_t)(h.nodes - 1) * h.status_stride,
				   sizeof(struct pn_sim_node_status));
	}
	free(g);
	return 0;
}
