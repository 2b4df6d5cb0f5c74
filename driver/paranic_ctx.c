// SPDX-License-Identifier: GPL-2.0
/*
 * Hardware contexts: the sequences of paranic/pn_ctxseq.h (open, close, window) on
 * this device's CSRs, the rings in coherent DMA memory and the context's DMA window
 * (MEM_REGISTER).
 */
#include <linux/delay.h>
#include <linux/dma-mapping.h>
#include <linux/ktime.h>
#include <linux/mm.h>
#include <linux/sched.h>
#include <linux/slab.h>

#include <paranic/pn_ctxseq.h>

#include "paranic_drv.h"

/* The context registers of pn_ctxseq.h as this build's CSRs (pn_csr.h). */
static const struct {
	u32 off;
	u32 bits;
} pn_ctxreg_csr[PN_CTXREG_COUNT] = {
#define PN_CTXREG_CSR(NAME, name) \
	[PN_CTXREG_##NAME] = { PN_CSR_HOST_CTX_##NAME, PN_CSR_HOST_CTX_##NAME##_SIZE },
	PN_CTXREGS(PN_CTXREG_CSR)
#undef PN_CTXREG_CSR
};

struct pn_seq_arg {
	struct pn_dev *d;
	ktime_t end;            /* give up waiting for the context after quiesce_ms */
	bool killable;          /* a process waits (open): give up on a fatal signal */
};

static void pn_seq_write(void *arg, enum pn_ctxreg reg, u64 v)
{
	struct pn_seq_arg *a = arg;

	pn_csr_write(a->d, pn_ctxreg_csr[reg].off, pn_ctxreg_csr[reg].bits, v);
}

static u32 pn_seq_read(void *arg, enum pn_ctxreg reg)
{
	struct pn_seq_arg *a = arg;

	return (u32)pn_csr_read(a->d, pn_ctxreg_csr[reg].off, pn_ctxreg_csr[reg].bits);
}

static int pn_seq_retry(void *arg, u32 state)
{
	struct pn_seq_arg *a = arg;

	if (ktime_after(ktime_get(), a->end))
		return -ETIMEDOUT;
	if (a->killable && fatal_signal_pending(current))
		return -EINTR;
	usleep_range(20, 100);
	return 0;
}

/*
 * No settle step: the CSR read that saw the context quiet also ordered the NIC's
 * earlier DMA writes before us (a completion never passes posted writes). Giving up
 * keeps the context as it is: the caller quarantines it.
 */
static const struct pn_ctxseq_io pn_seq_io = {
	.write = pn_seq_write,
	.read = pn_seq_read,
	.retry = pn_seq_retry,
	.settle = NULL,
	.give_up = PN_CTXSEQ_KEEP,
};

/*
 * Run a context sequence (paranic/pn_ctxseq.h): 0, -ETIMEDOUT, -ENODEV (a register read
 * all ones: the device is gone) or, if killable, -EINTR. Every wait is bounded by
 * quiesce_ms. d->lock held.
 */
static int pn_ctx_seq_wait(struct pn_dev *d, enum pn_ctxseq_kind kind, const struct pn_ctxseq_cfg *cfg,
			   bool killable)
{
	struct pn_seq_arg a = { .d = d, .end = ktime_add_ms(ktime_get(), pn_quiesce_ms), .killable = killable };

	return pn_ctxseq_run(kind, cfg, &pn_seq_io, &a);
}

static int pn_ctx_seq(struct pn_dev *d, enum pn_ctxseq_kind kind, const struct pn_ctxseq_cfg *cfg)
{
	return pn_ctx_seq_wait(d, kind, cfg, false);
}

/* Context c's configuration: its rings, status block and window. */
static struct pn_ctxseq_cfg pn_ctx_cfg(const struct pn_ctx *c)
{
	return (struct pn_ctxseq_cfg){
		.ctx = c->id,
		.rx_log2 = ilog2(c->geom.rx_slots),
		.tx_log2 = ilog2(c->geom.tx_entries),
		.rx_base = c->rx_dma,
		.tx_base = c->tx_dma,
		.status_addr = c->status_dma,
		.win_base = c->win_bytes ? c->win_dma : 0,
		.win_size = c->win_bytes,
	};
}

static void pn_ctx_free_mem(struct pn_ctx *c)
{
	struct device *dev = &c->dev->pdev->dev;

	if (c->rx)
		dma_free_coherent(dev, c->geom.rx_bytes, c->rx, c->rx_dma);
	if (c->tx)
		dma_free_coherent(dev, c->geom.tx_bytes, c->tx, c->tx_dma);
	if (c->status)
		dma_free_coherent(dev, c->geom.status_bytes, c->status, c->status_dma);
	c->rx = c->tx = c->status = NULL;
}

static void pn_win_free(struct pn_ctx *c)
{
	struct device *dev = &c->dev->pdev->dev;

	if (c->win_kind == PN_WIN_ALLOC) {
		dma_free_coherent(dev, PAGE_ALIGN(c->win_bytes), c->win, c->win_dma);
	} else if (c->win_kind == PN_WIN_USER) {
		dma_unmap_sgtable(dev, &c->sgt, DMA_TO_DEVICE, 0);
		sg_free_table(&c->sgt);
		unpin_user_pages(c->pages, c->npages);
		kvfree(c->pages);
	}
	c->win_kind = PN_WIN_NONE;
	c->win = NULL;
	c->pages = NULL;
	c->npages = 0;
	c->win_bytes = 0;
	c->win_dma = 0;
	c->win_user = 0;
}

int pn_ctx_open(struct pn_dev *d, struct pn_ctx **out)
{
	struct device *dev = &d->pdev->dev;
	struct pn_ctxseq_cfg cfg;
	struct pn_ctx *c;
	unsigned long flags;
	int r;

	c = kzalloc(sizeof(*c), GFP_KERNEL);
	if (!c)
		return -ENOMEM;
	c->dev = d;
	c->id = -1;
	mutex_init(&c->lock);
	init_waitqueue_head(&c->wq);
	atomic_set(&c->irq_count, 0);
	atomic_set(&c->win_maps, 0);
	r = pn_geom_init(&c->geom, d->mtu, pn_rx_log2, pn_tx_log2, PAGE_SIZE);
	if (r)
		goto fail;
	/* dma_alloc_coherent memory is zeroed: valid words 0, status block 0 (step 3). */
	c->rx = dma_alloc_coherent(dev, c->geom.rx_bytes, &c->rx_dma, GFP_KERNEL);
	c->tx = dma_alloc_coherent(dev, c->geom.tx_bytes, &c->tx_dma, GFP_KERNEL);
	c->status = dma_alloc_coherent(dev, c->geom.status_bytes, &c->status_dma, GFP_KERNEL);
	r = -ENOMEM;
	if (!c->rx || !c->tx || !c->status)
		goto fail;

	r = mutex_lock_killable(&d->lock);   /* another open may be waiting for its context */
	if (r)
		goto fail;
	r = pn_ctx_claim(&d->ctx_map, d->n_ctx, -1);
	if (r < 0) {
		mutex_unlock(&d->lock);
		goto fail;
	}
	c->id = r;
	cfg = pn_ctx_cfg(c);
	r = pn_ctx_seq_wait(d, PN_CTXSEQ_OPEN, &cfg, true);
	if (r == -EINTR) {
		/* Killed while the context was still busy: it is disabled and not reset;
		 * the next OPEN waits for it again. */
		pn_ctx_free(&d->ctx_map, d->n_ctx, c->id);
	} else if (r == -ENODEV) {
		dev_err(dev, "context %d: the device reads all ones at open: gone\n", c->id);
	} else if (r) {
		/* Left busy by someone we cannot see: keep it out of use. */
		dev_warn(dev, "context %d busy at open (%d); not used\n", c->id, r);
		r = -EBUSY;
	}
	if (r) {
		mutex_unlock(&d->lock);
		c->id = -1;
		goto fail;
	}
	mutex_unlock(&d->lock);

	spin_lock_irqsave(&d->irq_lock, flags);
	d->owner[c->id] = c;
	spin_unlock_irqrestore(&d->irq_lock, flags);
	*out = c;
	return 0;
fail:
	pn_ctx_free_mem(c);
	kfree(c);
	return r;
}

/* release(): the CLOSE sequence; free memory only once the NIC is done. */
void pn_ctx_close(struct pn_ctx *c)
{
	struct pn_dev *d = c->dev;
	struct pn_ctxseq_cfg cfg;
	unsigned long flags;
	int r = 0;

	spin_lock_irqsave(&d->irq_lock, flags);
	d->owner[c->id] = NULL;
	spin_unlock_irqrestore(&d->irq_lock, flags);

	down_read(&d->alive);
	mutex_lock(&d->lock);
	if (!d->dead) {
		cfg = pn_ctx_cfg(c);
		r = pn_ctx_seq(d, PN_CTXSEQ_CLOSE, &cfg);
	}
	if (r) {
		/* The NIC may still write into the rings: leak them rather than corrupt
		 * memory, and keep the context claimed (docs/driver.md). A device that
		 * reads all ones (gone, or its link down) may come back: the same. */
		dev_err(&d->pdev->dev, "context %d %s (%d): quarantined\n", c->id,
			r == -ENODEV ? "on a device that reads all ones" : "did not quiesce", r);
		c->quarantined = true;
	} else {
		pn_ctx_free(&d->ctx_map, d->n_ctx, c->id);
	}
	mutex_unlock(&d->lock);
	up_read(&d->alive);
	if (c->quarantined)
		return;
	pn_win_free(c);
	pn_ctx_free_mem(c);
	kfree(c->sendbuf);
	kfree(c);
}

/*
 * remove(): stop every claimed context before the BAR goes away (CLOSE; one that does
 * not go quiet is left disabled, not reset). Its rings are of no concern here: zeros
 * for them. d->alive held for writing.
 */
void pn_ctx_disable_all(struct pn_dev *d)
{
	u32 i;

	mutex_lock(&d->lock);
	for (i = 0; i < d->n_ctx; i++) {
		struct pn_ctxseq_cfg cfg = { .ctx = i };

		if (d->ctx_map & (1ULL << i))
			pn_ctx_seq(d, PN_CTXSEQ_CLOSE, &cfg);
	}
	mutex_unlock(&d->lock);
}

/* ---- the DMA window ---------------------------------------------------------------- */

/* Reprogram the window of an enabled context (WINDOW); on shrinking, also wait until
 * descriptors fetched under the old window are done (WINDOW_SHRINK). c->lock held,
 * d->alive held. */
static int pn_win_apply(struct pn_ctx *c, bool shrink)
{
	struct pn_dev *d = c->dev;
	struct pn_ctxseq_cfg cfg = pn_ctx_cfg(c);
	int r;

	mutex_lock(&d->lock);
	r = pn_ctx_seq(d, shrink ? PN_CTXSEQ_WINDOW_SHRINK : PN_CTXSEQ_WINDOW, &cfg);
	mutex_unlock(&d->lock);
	return r;
}

static int pn_win_pin(struct pn_ctx *c, const struct paranic_mem *m, u64 first, u64 npages)
{
	struct device *dev = &c->dev->pdev->dev;
	long got;
	int r;

	c->pages = kvcalloc(npages, sizeof(*c->pages), GFP_KERNEL);
	if (!c->pages)
		return -ENOMEM;
	/* The NIC only reads the window: no FOLL_WRITE. Long-term: the pin lasts. */
	got = pin_user_pages_fast(first, npages, FOLL_LONGTERM, c->pages);
	if (got < 0) {
		r = got;
		goto free_pages;
	}
	c->npages = got;
	if ((u64)got != npages) {
		r = -EFAULT;
		goto unpin;
	}
	r = sg_alloc_table_from_pages(&c->sgt, c->pages, npages, 0, npages << PAGE_SHIFT, GFP_KERNEL);
	if (r)
		goto unpin;
	r = dma_map_sgtable(dev, &c->sgt, DMA_TO_DEVICE, 0);
	if (r)
		goto free_sgt;
	/* One window per context: the pages must form one contiguous IOVA range (an
	 * IOMMU merges them; without one, only physically contiguous memory does). */
	if (c->sgt.nents != 1) {
		r = -EOPNOTSUPP;
		dma_unmap_sgtable(dev, &c->sgt, DMA_TO_DEVICE, 0);
		goto free_sgt;
	}
	c->win_kind = PN_WIN_USER;
	c->win_dma = sg_dma_address(c->sgt.sgl);
	c->win_bytes = npages << PAGE_SHIFT;
	c->win_user = m->addr;
	return 0;
free_sgt:
	sg_free_table(&c->sgt);
unpin:
	unpin_user_pages(c->pages, c->npages);
	c->npages = 0;
free_pages:
	kvfree(c->pages);
	c->pages = NULL;
	return r;
}

int pn_win_register(struct pn_ctx *c, struct paranic_mem *m)
{
	struct device *dev = &c->dev->pdev->dev;
	u64 first, npages;
	int r;

	mutex_lock(&c->lock);
	r = pn_mem_check(m, c->win_bytes,
			 m->flags & PARANIC_MEM_ALLOC ? pn_window_alloc_max() : (u64)pn_window_max_mb << 20,
			 TASK_SIZE, PAGE_SIZE, &first, &npages);
	if (r)
		goto out;
	if (m->flags & PARANIC_MEM_ALLOC) {
		c->win = dma_alloc_coherent(dev, npages << PAGE_SHIFT, &c->win_dma, GFP_KERNEL | __GFP_NOWARN);
		r = -ENOMEM;
		if (!c->win)
			goto out;
		c->win_kind = PN_WIN_ALLOC;
		c->win_bytes = npages << PAGE_SHIFT;
		m->dma = c->win_dma;
		m->mmap_offset = PARANIC_MMAP_WINDOW;
	} else {
		r = pn_win_pin(c, m, first, npages);
		if (r)
			goto out;
		m->dma = c->win_dma + (m->addr - first);
		m->mmap_offset = 0;
	}
	r = pn_win_apply(c, false);
out:
	mutex_unlock(&c->lock);
	return r;
}

int pn_win_deregister(struct pn_ctx *c, const struct paranic_mem *m)
{
	int r;

	mutex_lock(&c->lock);
	r = -EINVAL;
	if (c->win_kind == PN_WIN_NONE ||
	    (c->win_kind == PN_WIN_ALLOC && m->dma != c->win_dma) ||
	    (c->win_kind == PN_WIN_USER && m->addr != c->win_user))
		goto out;
	r = -EBUSY;
	if (atomic_read(&c->win_maps))
		goto out;       /* still mapped: munmap first */
	{
		u64 keep = c->win_bytes;

		c->win_bytes = 0;
		r = pn_win_apply(c, true);
		if (r) {
			c->win_bytes = keep;   /* NIC still reading: keep the memory */
			goto out;
		}
		c->win_bytes = keep;
	}
	pn_win_free(c);
out:
	mutex_unlock(&c->lock);
	return r;
}
