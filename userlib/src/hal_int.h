/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Private to the HAL's common code (hal.c, hal_mem.c, hal_send.c, hal_recv.c,
 * hal_wait.c): small helpers on struct pn_hal that more than one of them uses.
 */
#ifndef PN_HAL_INT_H
#define PN_HAL_INT_H

#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#include "hal_backend.h"

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "libparanic assumes a little-endian host (the NIC's layouts are little-endian)"
#endif

/* Internal to libparanic: no PLT indirection, not exported. */
#pragma GCC visibility push(hidden)

/* A length whose top bit is set is a negative number in disguise. */
#define PN_LEN_ABSURD ((size_t)SSIZE_MAX)

/* The first check of every public call on a handle: -EINVAL for NULL, -EBADF for a
 * closed one (pn_close poisons the handle and keeps its memory for a while). */
#define PN_HAL_CHECK(h)                                 \
	do {                                            \
		if (!(h))                               \
			return -EINVAL;                 \
		if ((h)->magic != PN_HAL_MAGIC)         \
			return -EBADF;                  \
	} while (0)

/* A word of the status block, as the NIC last wrote it. */
static inline uint32_t sts_load(const pn_hal_t *h, unsigned word)
{
	return __atomic_load_n(&h->map.status[word], __ATOMIC_ACQUIRE);
}

/* Count a refused call (pn_status: refused) and return err. */
static inline int refuse(pn_hal_t *h, int err)
{
	h->refused++;
	return err;
}

/* Return the RX slots consumed since the last RX_HEAD doorbell. */
static inline void rx_flush(pn_hal_t *h)
{
	if (h->rx_head_sent != h->rx_next) {
		h->rx_head_sent = h->rx_next;
		__atomic_thread_fence(__ATOMIC_RELEASE);
		h->ops->mmio_write32(h, PN_REG_RX_HEAD, (uint32_t)h->rx_next);
	}
}

/* One RX slot as the NIC wrote it (slot_bytes >= PN_RX_SLOT_BYTES(mtu) bytes at slot, as
 * the HAL set the ring up; the
 * NIC, or the process or simulator that plays it, may have written anything there). 1: the
 * slot holds packet number `want` (its valid word says want + 1; the low 32 bits compared,
 * so that a NIC keeping a 32-bit count works as well as one keeping 64), its header in
 * *out; 0: not there yet; -EPROTO: a record the HAL must refuse (a length beyond the MTU,
 * or a packet type that no NIC delivers to a ring). Reads nothing outside the slot. Inline: every
 * poll of the receive path runs it (tests/userlib/test_ports_icount.py). Fuzzed by
 * tests/fuzz/fuzz_rx_ring.c through pn_recv_header (hal_recv.c). */
static inline __attribute__((always_inline)) int pn_rx_parse_slot(const volatile uint8_t *slot, uint32_t slot_bytes,
								   uint32_t mtu, uint64_t want, pn_header_t *out)
{
	uint64_t v, w[2];

	v = __atomic_load_n((volatile uint64_t *)(slot + slot_bytes - PN_RX_VALID_BYTES), __ATOMIC_ACQUIRE);
	if ((uint32_t)v != (uint32_t)(want + 1))
		return 0;
	w[0] = ((volatile uint64_t *)slot)[0];
	w[1] = ((volatile uint64_t *)slot)[1];
	out->dst_node = (uint16_t)PN_GET(w, PN_HDR_DST_NODE);
	out->src_node = (uint16_t)PN_GET(w, PN_HDR_SRC_NODE);
	out->dst_ctx = (uint8_t)PN_GET(w, PN_HDR_DST_CTX);
	out->src_ctx = (uint8_t)PN_GET(w, PN_HDR_SRC_CTX);
	out->type = (uint8_t)PN_GET(w, PN_HDR_TYPE);
	out->flags = (uint8_t)PN_GET(w, PN_HDR_FLAGS);
	out->length = (uint32_t)PN_GET(w, PN_HDR_LENGTH);
	out->tag = PN_GET(w, PN_HDR_TAG);
	/* the payload must end inside the slot: at most the MTU, and the slot holds that */
	if (out->length > mtu || slot_bytes < PN_RX_SLOT_BYTES(mtu) || out->type > PN_TYPE_COLLECTIVE)
		return -EPROTO;
	return 1;
}

/* What the send side waits for (pn_hal_wait). */
enum pn_wait_for {
	PN_WAIT_PIO_WINDOW,   /* the PIO window is free: every PIO packet posted has left */
	PN_WAIT_TX_DONE,      /* the first `count` DMA descriptors completed */
	PN_WAIT_TX_ROOM,      /* the TX ring has a free entry */
};

static inline int pn_hal_ready(const pn_hal_t *h, enum pn_wait_for what, uint32_t count)
{
	switch (what) {
	case PN_WAIT_PIO_WINDOW:
		return (int32_t)(sts_load(h, PN_STS_PIO_DONE_WORD) - h->pio_posted) >= 0;
	case PN_WAIT_TX_DONE:
		return (int32_t)(sts_load(h, PN_STS_TX_DONE_WORD) - count) >= 0;
	default:
		return h->tx_tail - sts_load(h, PN_STS_TX_DONE_WORD) < h->map.tx_entries;
	}
}

/* A wait that made no progress (neither tx_done nor pio_done moved) for its stall_ns:
 * 0 to keep waiting (the clock starts again), else the error the wait returns. */
typedef int (*pn_stall_fn)(void *arg);

/* The send side's one wait loop (hal_wait.c; the HAL's sends and pn_tx_wait*, rawdata's
 * sends): until `what` holds, in rounds that let the NIC work, let the upper layer drain
 * through the wait hook, back off, and every PN_ALIVE_EVERY rounds ask whether the NIC
 * is still there. stall_ns > 0: stalled(arg) is asked whenever nothing moved for that
 * long (rawdata's deadline); 0: no deadline. 0, or the error of a NIC that went away
 * (-EIO, -ENODEV) or of stalled. */
int pn_hal_wait_slow(pn_hal_t *h, enum pn_wait_for what, uint32_t count, int64_t stall_ns, pn_stall_fn stalled,
		     void *arg);
static inline int pn_hal_wait(pn_hal_t *h, enum pn_wait_for what, uint32_t count, int64_t stall_ns,
			      pn_stall_fn stalled, void *arg)
{
	return pn_hal_ready(h, what, count) ? 0 : pn_hal_wait_slow(h, what, count, stall_ns, stalled, arg);
}

#pragma GCC visibility pop

#endif /* PN_HAL_INT_H */
