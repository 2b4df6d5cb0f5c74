/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The simulator's side of its attach protocol (sim_proto.c, used by sim/harness
 * clients.cpp, device.cpp and faults.cpp): what a connection's message is
 * (pn_sim_msg_kind), a process's or a device's hello (pn_sim_check_hello,
 * pn_sim_check_device_hello) with the control block in its memory (pn_sim_check_ctl), and
 * a fault request (pn_sim_check_fault). What the checks accept must keep every region the
 * harness then maps inside the client's memory.
 *
 * Input: [fds][memfd size selector][message length][message ...][control block ...].
 */
#include <errno.h>

#include "fuzz.h"
#include "paranic/pn_protocol.h"
#include "pn_sim_proto.h"

#define NODES 4
#define NCTX 16
#define MTU 1024
#define CABLES 4

static int inside(uint64_t off, uint64_t len, uint64_t bytes)
{
	return off <= bytes && len <= bytes && off + len <= bytes;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *d = data;
	size_t n = size;
	int nfds = (int)(fuzz_take(&d, &n, 1) % 4);
	unsigned sel = (unsigned)fuzz_take(&d, &n, 1);
	size_t mlen = (size_t)fuzz_take(&d, &n, 1);
	uint8_t *msg;
	struct pn_sim_ctl ctl;
	int kind;

	if (mlen > n)
		mlen = n;
	msg = fuzz_dup(d, mlen);
	d += mlen;
	n -= mlen;
	memset(&ctl, 0, sizeof(ctl));
	memcpy(&ctl, d, n < sizeof(ctl) ? n : sizeof(ctl));

	kind = pn_sim_msg_kind(msg, mlen, nfds);
	FUZZ_ASSERT(kind == -EPROTO || kind == PN_SIM_MSG_HELLO || kind == PN_SIM_MSG_DEVICE || kind == PN_SIM_MSG_FAULT);
	if (kind == PN_SIM_MSG_FAULT) {
		struct pn_sim_fault f;
		FUZZ_ASSERT(mlen == sizeof(f));
		memcpy(&f, msg, sizeof(f));
		if (pn_sim_check_fault(&f, CABLES) == 0)
			FUZZ_ASSERT(f.cable < CABLES && f.op >= PN_SIM_FAULT_CUT && f.op <= PN_SIM_FAULT_QUERY &&
				    (f.op != PN_SIM_FAULT_BER || f.value <= 0xffffffffull));
	} else if (kind > 0) {
		struct pn_sim_hello h;
		struct pn_sim_hello_layout lay;
		uint64_t memfd;
		FUZZ_ASSERT(mlen == sizeof(h) && nfds == (kind == PN_SIM_MSG_DEVICE ? 2 : 1));
		memcpy(&h, msg, sizeof(h));
		/* The memfd's size as fstat gives it: the hello's claim, less, more, or anything. */
		memfd = (sel & 3) == 0 ? h.mem_bytes : (sel & 3) == 1 ? h.mem_bytes - 4096 :
			(sel & 3) == 2 ? h.mem_bytes + ((uint64_t)sel << 12) : ~0ull >> (sel >> 2);
		if (kind == PN_SIM_MSG_DEVICE) {
			if (pn_sim_check_device_hello(&h, memfd, h.heap_bytes + (sel & 1), NODES) == 0) {
				FUZZ_ASSERT(h.mem_bytes >= 4096 && h.mem_bytes <= memfd && h.heap_bytes);
				FUZZ_ASSERT(h.node >= 0 && h.node < NODES);
				if (pn_sim_check_ctl(&ctl, h.mem_bytes, &(uint32_t){0}) == 0)
					FUZZ_ASSERT(inside(ctl.queue_off, (uint64_t)ctl.qsize * sizeof(struct pn_sim_op),
							   h.mem_bytes));
			}
		} else if (pn_sim_check_hello(&h, memfd, NODES, NCTX, MTU, &lay) == 0) {
			uint32_t qmask;
			FUZZ_ASSERT(h.node >= 0 && h.node < NODES && h.ctx >= -1 && h.ctx < NCTX);
			FUZZ_ASSERT(h.mem_bytes <= memfd && h.mem_bytes <= PN_SIM_MAX_MEM);
			FUZZ_ASSERT(lay.rx_bytes == (uint64_t)lay.rx_slots * lay.slot_bytes &&
				    lay.slot_bytes == PN_RX_SLOT_BYTES(MTU));
			FUZZ_ASSERT(h.status_off >= sizeof(struct pn_sim_ctl));
			FUZZ_ASSERT(inside(h.status_off, PN_STATUS_BLOCK_BYTES, h.mem_bytes));
			FUZZ_ASSERT(inside(h.rx_off, lay.rx_bytes, h.mem_bytes));
			FUZZ_ASSERT(inside(h.tx_off, lay.tx_bytes, h.mem_bytes));
			FUZZ_ASSERT(inside(h.heap_off, h.heap_bytes, h.mem_bytes));
			FUZZ_ASSERT(h.rx_off >= h.status_off + PN_STATUS_BLOCK_BYTES && h.tx_off >= h.rx_off + lay.rx_bytes &&
				    h.heap_off >= h.tx_off + lay.tx_bytes);
			/* The MMIO queue lies below the status block. */
			if (pn_sim_check_ctl(&ctl, h.status_off, &qmask) == 0) {
				FUZZ_ASSERT(((qmask + 1) & qmask) == 0 && qmask + 1 == ctl.qsize);
				FUZZ_ASSERT(ctl.queue_off >= sizeof(struct pn_sim_ctl));
				FUZZ_ASSERT(inside(ctl.queue_off, (uint64_t)ctl.qsize * sizeof(struct pn_sim_op),
						   h.status_off));
			}
		}
	}
	free(msg);
	return 0;
}
