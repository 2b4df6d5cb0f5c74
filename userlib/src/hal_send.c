/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The HAL's send side: PIO (stage payload and tag in the context page's window
 * with 64-bit stores, then header word 0 through PIO_SEND, the store+doorbell), DMA
 * (a 32-byte descriptor into the TX ring, ring TX_TAIL), pn_send's choice between them and its bounce buffer, and waiting for
 * the NIC to have taken what was posted.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>

#include "hal_int.h"

/* The arguments first (-EINVAL), then where they go (-EHOSTUNREACH): a call with a
 * bad buffer is refused as such whatever its destination. */
static int check_send(pn_hal_t *h, unsigned dst_node, unsigned dst_ctx, const void *buf, size_t len)
{
	if (len > PN_LEN_ABSURD || (!buf && len) || dst_ctx >= h->map.num_ctx)
		return refuse(h, -EINVAL);
	if (dst_node >= h->map.num_nodes)
		return refuse(h, -EHOSTUNREACH);
	return h->dead;
}

static uint32_t packets_of(const pn_hal_t *h, size_t len)
{
	return len ? (uint32_t)((len + h->map.mtu - 1) / h->map.mtu) : 1;
}

static int pio_wait_window(pn_hal_t *h)
{
	int r = pn_hal_wait(h, PN_WAIT_PIO_WINDOW, 0, 0, NULL, NULL);
	return r < 0 ? r : h->dead;
}

/* Stage one PIO packet and send it. Every word but header word 0 is stored first
 * (payload, then the tag word), then a write barrier, then header word 0 through
 * PIO_SEND, the store+doorbell: one 64-bit store that writes window word 0 and rings
 * (docs/host-interface.md "PIO transmit"). The barrier is the ordering argument:
 * write-combined stores may leave in any order among themselves, but not across it, and
 * the NIC applies posted writes in order, so every staged word is in the window before
 * the beat that rings. */
static void pio_stage_ring(pn_hal_t *h, const uint64_t hdr[2], const void *buf, size_t len)
{
	const uint8_t *p = buf;
	size_t full = len / 8, tail = len % 8;
	uint64_t v;

	h->pio_posted++;
	if (h->map.ctx_page) {
		volatile uint64_t *w = (volatile uint64_t *)(h->map.ctx_page + PN_PIO_WINDOW_OFFSET);
		for (size_t i = 0; i < full; i++) {
			memcpy(&v, p + 8 * i, 8);
			w[2 + i] = v;
		}
		if (tail) {
			v = 0;
			memcpy(&v, p + 8 * full, tail);
			w[2 + full] = v;
		}
		w[1] = hdr[1];
		pn_wmb();
		*(volatile uint64_t *)(h->map.ctx_page + PN_REG_PIO_SEND) = hdr[0];
		return;
	}
	if (h->ops->pio_stage) {
		h->ops->pio_stage(h, hdr, buf, len);
	} else {
		uint32_t off = PN_PIO_WINDOW_OFFSET;
		for (size_t i = 0; i < full; i++) {
			memcpy(&v, p + 8 * i, 8);
			h->ops->mmio_write64(h, off + 16 + 8 * (uint32_t)i, v);
		}
		if (tail) {
			v = 0;
			memcpy(&v, p + 8 * full, tail);
			h->ops->mmio_write64(h, off + 16 + 8 * (uint32_t)full, v);
		}
		h->ops->mmio_write64(h, off + 8, hdr[1]);
	}
	pn_wmb();
	h->ops->mmio_write64(h, PN_REG_PIO_SEND, hdr[0]);
}

int pn_send_pio(pn_hal_t *h, unsigned dst_node, unsigned dst_ctx, uint64_t tag,
		const void *buf, size_t len)
{
	uint64_t w[2] = {0, 0};
	int r;

	PN_HAL_CHECK(h);
	if ((r = check_send(h, dst_node, dst_ctx, buf, len)) < 0)
		return r;
	if (len > h->pio_max)
		return refuse(h, -EMSGSIZE);
	PN_SET(w, PN_HDR_DST_NODE, dst_node);
	PN_SET(w, PN_HDR_DST_CTX, dst_ctx);
	PN_SET(w, PN_HDR_TYPE, PN_TYPE_DATA);
	PN_SET(w, PN_HDR_LENGTH, len);
	PN_SET(w, PN_HDR_FLAGS, PN_FLAG_SOM | PN_FLAG_EOM);
	PN_SET(w, PN_HDR_TAG, tag);
	if ((r = pio_wait_window(h)) < 0)
		return r;
	pio_stage_ring(h, w, buf, len);
	if (h->dead)
		return h->dead;   /* the backend found the NIC gone while posting */
	h->sent_packets++;
	h->sent_bytes += len;
	return 0;
}

int pn_pio_raw(pn_hal_t *h, const uint64_t hdr[2], const void *payload, size_t len)
{
	int r;

	PN_HAL_CHECK(h);
	if (!hdr || (!payload && len) || len > PN_LEN_ABSURD)
		return refuse(h, -EINVAL);
	if (len > PN_PIO_WINDOW_BYTES - PN_HEADER_BYTES)
		return refuse(h, -EMSGSIZE);
	if ((r = pio_wait_window(h)) < 0)
		return r;
	pio_stage_ring(h, hdr, payload, len);
	return h->dead;
}

static int tx_post(pn_hal_t *h, const uint64_t d[4])
{
	volatile uint64_t *slot;
	int r;

	if (h->dead)
		return h->dead;
	if ((r = pn_hal_wait(h, PN_WAIT_TX_ROOM, 0, 0, NULL, NULL)) < 0)
		return r;
	slot = (volatile uint64_t *)(h->map.tx_ring + (size_t)(h->tx_tail & h->tx_mask) * PN_TX_DESC_BYTES);
	slot[0] = d[0];
	slot[1] = d[1];
	slot[2] = d[2];
	slot[3] = d[3];
	h->tx_tail++;
	pn_wmb();
	h->ops->mmio_write32(h, PN_REG_TX_TAIL, h->tx_tail);
	return h->dead;
}

int pn_tx_post_raw(pn_hal_t *h, const uint64_t desc[4])
{
	PN_HAL_CHECK(h);
	if (!desc)
		return refuse(h, -EINVAL);
	return tx_post(h, desc);
}

static int dma_post(pn_hal_t *h, unsigned dst_node, unsigned dst_ctx, uint64_t tag,
		    uint64_t dma, size_t len)
{
	uint64_t d[4] = {0, 0, 0, 0};
	PN_SET(d, PN_DESC_ADDR, dma);
	PN_SET(d, PN_DESC_LENGTH, len);
	PN_SET(d, PN_DESC_DST_NODE, dst_node);
	PN_SET(d, PN_DESC_DST_CTX, dst_ctx);
	PN_SET(d, PN_DESC_TYPE, PN_TYPE_DATA);
	PN_SET(d, PN_DESC_TAG, tag);
	PN_SET(d, PN_DESC_COOKIE, h->tx_tail);
	h->sent_packets += packets_of(h, len);
	h->sent_bytes += len;
	return tx_post(h, d);
}

int pn_send_dma(pn_hal_t *h, unsigned dst_node, unsigned dst_ctx, uint64_t tag,
		const void *buf, size_t len)
{
	uint64_t dma = 0;
	int r;

	PN_HAL_CHECK(h);
	if ((r = check_send(h, dst_node, dst_ctx, buf, len)) < 0)
		return r;
	if (len > PN_MAX_DMA_LENGTH)
		return refuse(h, -EMSGSIZE);
	if (len && pn_mem_dma_addr(h, buf, len, &dma) < 0)
		return refuse(h, -EFAULT);
	return dma_post(h, dst_node, dst_ctx, tag, dma, len);
}

int pn_send(pn_hal_t *h, unsigned dst_node, unsigned dst_ctx, uint64_t tag,
	    const void *buf, size_t len)
{
	int r;

	PN_HAL_CHECK(h);
	if ((r = check_send(h, dst_node, dst_ctx, buf, len)) < 0)
		return r;
	if ((long)len <= h->pio_threshold && len <= h->pio_max)
		return pn_send_pio(h, dst_node, dst_ctx, tag, buf, len);
	if (len > PN_MAX_DMA_LENGTH)
		return refuse(h, -EMSGSIZE);
	if (pn_mem_is_registered(h, buf, len))
		return pn_send_dma(h, dst_node, dst_ctx, tag, buf, len);

	/* Bounce: wait until its previous use completed, grow it if needed, copy, post. */
	if ((r = pn_tx_wait_until(h, h->bounce_ticket)) < 0)
		return r;
	if (h->bounce_len < len) {
		size_t want = 64 * 1024;
		void *nb;
		while (want < len)
			want <<= 1;
		if (h->bounce)
			pn_dma_free(h, h->bounce);
		h->bounce = NULL;
		h->bounce_len = 0;
		if ((r = pn_dma_alloc(h, want, &nb)) < 0)
			return refuse(h, r);
		h->bounce = nb;
		h->bounce_len = want;
	}
	memcpy(h->bounce, buf, len);
	r = pn_send_dma(h, dst_node, dst_ctx, tag, h->bounce, len);
	h->bounce_ticket = h->tx_tail;
	return r;
}

uint32_t pn_tx_posted(const pn_hal_t *h)
{
	return h && h->magic == PN_HAL_MAGIC ? h->tx_tail : 0;
}

int pn_tx_wait_until(pn_hal_t *h, uint32_t count)
{
	PN_HAL_CHECK(h);
	if ((int32_t)(count - h->tx_tail) > 0)
		return refuse(h, -EINVAL);
	return pn_hal_wait(h, PN_WAIT_TX_DONE, count, 0, NULL, NULL);
}

int pn_tx_wait(pn_hal_t *h)
{
	int r;
	PN_HAL_CHECK(h);
	if ((r = pn_tx_wait_until(h, h->tx_tail)) < 0)
		return r;
	return pio_wait_window(h);
}
