/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Private to the HAL's common code (hal.c, hal_mem.c, hal_send.c, hal_recv.c,
 * hal_wait.c): small helpers on struct pn_hal that more than one of them uses.
 */
#ifndef PN_HAL_INT_H
#define PN_HAL_INT_H

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

/* Parse one RX slot (hal_recv.c): 1 packet `want` is there (*out), 0 not yet, -EPROTO a
 * broken record to refuse. */
int pn_rx_parse_slot(const volatile uint8_t *slot, uint32_t slot_bytes, uint32_t mtu, uint64_t want,
		     pn_header_t *out);

/* One round of a wait loop (hal_wait.c): let the NIC work, let the upper layer drain,
 * back off. */
void pn_hal_wait_step(pn_hal_t *h, struct pn_backoff *b);

#pragma GCC visibility pop

#endif /* PN_HAL_INT_H */
