/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The HAL's receive side: poll the next RX slot's valid word, hand out its header,
 * copy or skip its payload, return slots to the NIC with RX_HEAD (in batches).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>

#include "hal_int.h"

static inline volatile uint8_t *rx_slot(const pn_hal_t *h, uint64_t n)
{
	return h->map.rx_ring + (size_t)(n & h->rx_mask) * h->map.rx_slot_bytes;
}

static int rx_poll(pn_hal_t *h)
{
	/* At most one lap of the ring: a writer that keeps marking broken records cannot hold
	 * the caller here. */
	for (uint32_t k = 0; k <= h->rx_mask; k++) {
		volatile uint8_t *s = rx_slot(h, h->rx_next);
		int r = pn_rx_parse_slot(s, h->map.rx_slot_bytes, h->map.mtu, h->rx_next, &h->cur);
		if (r > 0) {
			h->cur_slot = s;
			h->cur_valid = 1;
			return 1;
		}
		if (r == 0)
			return 0;
		/* A broken record: refused (counted), its slot given back, the next one looked at. */
		h->rx_refused++;
		h->rx_next++;
		if (h->rx_next - h->rx_head_sent >= h->rx_batch)
			rx_flush(h);
	}
	return 0;
}

int pn_recv_header(pn_hal_t *h, pn_header_t *hdr)
{
	PN_HAL_CHECK(h);
	if (!hdr)
		return -EINVAL;
	if (!h->cur_valid && !rx_poll(h)) {
		/* Nothing there: let a software NIC work, return freed slots, look again. */
		rx_flush(h);
		if (h->ops->progress)
			h->ops->progress(h);
		if (!rx_poll(h))
			return 0;
	}
	*hdr = h->cur;
	return 1;
}

static void rx_release(pn_hal_t *h)
{
	h->cur_valid = 0;
	h->rx_next++;
	h->recv_packets++;
	h->recv_bytes += h->cur.length;
	if (h->rx_next - h->rx_head_sent >= h->rx_batch)
		rx_flush(h);
}

int pn_recv_body(pn_hal_t *h, void *buf, size_t len)
{
	uint32_t n;
	PN_HAL_CHECK(h);
	if (!h->cur_valid)
		return -ENOENT;
	n = h->cur.length;
	if (len < n)
		return -EMSGSIZE;
	if (!buf && n)
		return -EINVAL;
	if (n)
		memcpy(buf, (const void *)(uintptr_t)(h->cur_slot + PN_RX_SLOT_PAYLOAD_OFFSET), n);
	rx_release(h);
	return (int)n;
}

int pn_recv_skip(pn_hal_t *h)
{
	uint32_t n;
	PN_HAL_CHECK(h);
	if (!h->cur_valid)
		return -ENOENT;
	n = h->cur.length;
	rx_release(h);
	return (int)n;
}

int pn_recv_payload(pn_hal_t *h, const void **payload)
{
	PN_HAL_CHECK(h);
	if (!payload)
		return -EINVAL;
	if (!h->cur_valid)
		return -ENOENT;
	*payload = (const void *)(uintptr_t)(h->cur_slot + PN_RX_SLOT_PAYLOAD_OFFSET);
	return (int)h->cur.length;
}

int pn_recv_wait(pn_hal_t *h, pn_header_t *hdr, int64_t timeout_ns)
{
	struct pn_backoff b = {0};
	uint64_t t0 = 0;
	uint32_t spins = 0;
	int r;

	PN_HAL_CHECK(h);
	if (!hdr)
		return -EINVAL;
	for (;;) {
		if ((r = pn_recv_header(h, hdr)) != 0)
			return r;
		/* Nothing there: packets already in the ring are still handed out above, but
		 * no new one comes from a NIC that went away. */
		if ((r = pn_wait_alive(h, &spins)) < 0)
			return r;
		if (timeout_ns >= 0) {
			uint64_t now = pn_monotonic_ns();
			if (!t0)
				t0 = now;
			else if (now - t0 >= (uint64_t)timeout_ns)
				return 0;
		}
		if (h->hook && !h->in_hook) {
			h->in_hook = 1;
			h->hook(h, h->hook_arg);
			h->in_hook = 0;
		}
		pn_backoff_step(&b);
	}
}
