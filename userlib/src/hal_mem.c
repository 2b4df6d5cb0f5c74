/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The HAL's DMA-able memory: buffers from the backend (pn_dma_alloc) and registered
 * caller memory (pn_mem_register), tracked as regions so that a send can find the DMA
 * address of its buffer; pn_close releases what is left.
 *
 * A region the NIC may still read is never released: pn_dma_free and pn_mem_deregister
 * return -EBUSY while a posted descriptor that is not yet done (status block tx_done)
 * reads from it, as the driver's MEM_DEREGISTER does, so the memory stays valid (and
 * mapped, and in the sw NIC's window) until the DMA is done.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>

#include "hal_int.h"

static struct pn_region *region_find(const pn_hal_t *h, const void *buf, size_t len)
{
	uintptr_t a = (uintptr_t)buf;
	for (int i = 0; i < h->nregions; i++) {
		const struct pn_region *rg = &h->regions[i];
		uintptr_t b = (uintptr_t)rg->va;
		if (a >= b && a - b <= rg->len && len <= rg->len - (a - b))
			return (struct pn_region *)rg;
	}
	return NULL;
}

static int region_add(pn_hal_t *h, void *va, size_t len, uint64_t dma, int allocated)
{
	if (h->nregions >= PN_HAL_MAX_REGIONS)
		return -ENOMEM;
	h->regions[h->nregions++] = (struct pn_region){(uint8_t *)va, len, dma, allocated};
	return 0;
}

/* A posted descriptor that is not yet done reads from rg's bus addresses. */
static int region_dma_scan(const pn_hal_t *h, const struct pn_region *rg)
{
	uint32_t done = sts_load(h, PN_STS_TX_DONE_WORD);
	uint32_t n = h->tx_tail - done;

	if (n > h->map.tx_entries)   /* cannot be: the ring holds no more */
		n = h->map.tx_entries;
	for (uint32_t i = 0; i < n; i++) {
		const volatile uint64_t *slot = (const volatile uint64_t *)
			(h->map.tx_ring + (size_t)((done + i) & h->tx_mask) * PN_TX_DESC_BYTES);
		uint64_t d[4] = {slot[0], slot[1], slot[2], slot[3]};
		uint64_t a = PN_GET(d, PN_DESC_ADDR), l = PN_GET(d, PN_DESC_LENGTH);
		if (l && a < rg->dma + rg->len && rg->dma < a + l)
			return 1;
	}
	return 0;
}

/* As above, after letting the NIC make progress once (the sw NIC runs in its callers). */
static int region_dma_pending(pn_hal_t *h, const struct pn_region *rg)
{
	if (!region_dma_scan(h, rg))
		return 0;
	if (h->ops->progress)
		h->ops->progress(h);
	return region_dma_scan(h, rg);
}

static void region_del(pn_hal_t *h, struct pn_region *rg)
{
	int i = (int)(rg - h->regions);
	memmove(&h->regions[i], &h->regions[i + 1], (size_t)(h->nregions - i - 1) * sizeof(*rg));
	h->nregions--;
}

int pn_dma_alloc(pn_hal_t *h, size_t len, void **out)
{
	void *va;
	uint64_t dma;
	int r;

	PN_HAL_CHECK(h);
	if (!out || !len || len > PN_LEN_ABSURD)
		return -EINVAL;
	*out = NULL;
	if (h->nregions >= PN_HAL_MAX_REGIONS)
		return -ENOMEM;
	if ((r = h->ops->dma_alloc(h, len, &va, &dma)) < 0)
		return r;
	region_add(h, va, len, dma, 1);
	*out = va;
	return 0;
}

int pn_dma_free(pn_hal_t *h, void *buf)
{
	PN_HAL_CHECK(h);
	if (!buf)
		return -EINVAL;
	for (int i = 0; i < h->nregions; i++) {
		struct pn_region *rg = &h->regions[i];
		if (rg->va == buf && rg->allocated) {
			if (region_dma_pending(h, rg))
				return -EBUSY;
			h->ops->dma_free(h, rg->va, rg->len);
			if (h->bounce == buf) {
				h->bounce = NULL;
				h->bounce_len = 0;
			}
			region_del(h, rg);
			return 0;
		}
	}
	return -ENOENT;
}

int pn_mem_register(pn_hal_t *h, void *buf, size_t len)
{
	uint64_t dma;
	int r;

	PN_HAL_CHECK(h);
	if (!buf || !len || len > PN_LEN_ABSURD)
		return -EINVAL;
	if ((uintptr_t)buf + len < (uintptr_t)buf)
		return -EINVAL;   /* the region would wrap around the address space */
	if (h->nregions >= PN_HAL_MAX_REGIONS)
		return -ENOMEM;
	if ((r = h->ops->mem_register(h, buf, len, &dma)) < 0)
		return r;
	return region_add(h, buf, len, dma, 0);
}

int pn_mem_deregister(pn_hal_t *h, void *buf)
{
	PN_HAL_CHECK(h);
	if (!buf)
		return -EINVAL;
	for (int i = 0; i < h->nregions; i++) {
		struct pn_region *rg = &h->regions[i];
		if (rg->va == buf && !rg->allocated) {
			if (region_dma_pending(h, rg))
				return -EBUSY;
			h->ops->mem_deregister(h, rg->va, rg->len);
			region_del(h, rg);
			return 0;
		}
	}
	return -ENOENT;
}

int pn_mem_is_registered(const pn_hal_t *h, const void *buf, size_t len)
{
	if (!h || !buf)
		return 0;
	return region_find(h, buf, len) != NULL;
}

int pn_mem_dma_addr(const pn_hal_t *h, const void *buf, size_t len, uint64_t *dma)
{
	const struct pn_region *rg;
	PN_HAL_CHECK(h);
	if (!buf || !dma)
		return -EINVAL;
	rg = region_find(h, buf, len);
	if (!rg)
		return -EFAULT;
	*dma = rg->dma + (uint64_t)((const uint8_t *)buf - rg->va);
	return 0;
}
