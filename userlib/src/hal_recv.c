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

/* One RX slot as the NIC wrote it (slot_bytes = PN_RX_SLOT_BYTES(mtu) bytes at slot; the
 * NIC, or the process or simulator that plays it, may have written anything there). 1: the
 * slot holds packet number `want` (its valid word says want + 1; the low 32 bits compared,
 * so that a NIC keeping a 32-bit count works as well as one keeping 64), its header in
 * *out; 0: not there yet; -EPROTO: a record the HAL must refuse (a length beyond the MTU,
 * or a packet type that no NIC delivers). Reads nothing outside the slot. Fuzzed by
 * tests/fuzz/fuzz_rx_ring.c. */
int pn_rx_parse_slot(const volatile uint8_t *slot, uint32_t slot_bytes, uint32_t mtu, uint64_t want,
		     pn_header_t *out)
{
	uint64_t v, w[2];

	if (slot_bytes < PN_RX_SLOT_BYTES(mtu) || mtu > PN_MAX_MTU)
		return -EPROTO;   /* a ring the HAL set up wrong: never read past the slot */
	v = __atomic_load_n((volatile uint64_t *)(slot + PN_RX_VALID_OFFSET(mtu)), __ATOMIC_ACQUIRE);
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
	if (out->length > mtu || out->type > PN_TYPE_RMA_RESP)
		return -EPROTO;
	return 1;
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
	if (!h || !hdr)
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
	if (!h)
		return -EINVAL;
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
	if (!h)
		return -EINVAL;
	if (!h->cur_valid)
		return -ENOENT;
	n = h->cur.length;
	rx_release(h);
	return (int)n;
}

int pn_recv_payload(pn_hal_t *h, const void **payload)
{
	if (!h || !payload)
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
	int r;

	if (!h || !hdr)
		return -EINVAL;
	for (;;) {
		if ((r = pn_recv_header(h, hdr)) != 0)
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
