/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The HAL's DMA-able memory: buffers from the backend (pn_dma_alloc) and registered
 * caller memory (pn_mem_register), tracked as regions so that a send can find the DMA
 * address of its buffer; pn_close releases what is left.
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

	if (!h || !out || !len || len > PN_LEN_ABSURD)
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
	if (!h || !buf)
		return -EINVAL;
	for (int i = 0; i < h->nregions; i++) {
		struct pn_region *rg = &h->regions[i];
		if (rg->va == buf && rg->allocated) {
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

	if (!h || !buf || !len || len > PN_LEN_ABSURD)
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
	if (!h || !buf)
		return -EINVAL;
	for (int i = 0; i < h->nregions; i++) {
		struct pn_region *rg = &h->regions[i];
		if (rg->va == buf && !rg->allocated) {
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
	if (!h || !buf || !dma)
		return -EINVAL;
	rg = region_find(h, buf, len);
	if (!rg)
		return -EFAULT;
	*dma = rg->dma + (uint64_t)((const uint8_t *)buf - rg->va);
	return 0;
}
