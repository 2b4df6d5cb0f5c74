/* SPDX-License-Identifier: GPL-2.0 */
/*
 * paranic.ko internals: the board (struct pn_dev), an open context (struct pn_ctx),
 * CSR access and the functions the driver's files share.
 *
 *   paranic_main.c   PCI probe/remove, MSI vectors, sysfs, module parameters
 *   paranic_ctx.c    context hand-over (claim, program, quiesce, reclaim), DMA window
 *   paranic_fops.c   /dev/paranic<N>: open, release, mmap, ioctl, write, poll
 *   pn_logic.c       hardware-independent checks (also built and tested in user space)
 */
#ifndef PARANIC_DRV_H
#define PARANIC_DRV_H

#include <linux/io.h>
#include <linux/kref.h>
#include <linux/miscdevice.h>
#include <linux/mutex.h>
#include <linux/pci.h>
#include <linux/rwsem.h>
#include <linux/scatterlist.h>
#include <linux/spinlock.h>
#include <linux/wait.h>

#include "paranic/pn_protocol.h"
#include "pn_csr.h"
#include "pn_logic.h"

#define PN_DRV_NAME "paranic"

struct pn_dev;

/* One vector's handler argument: vector v serves contexts c with c % nvec == v. */
struct pn_vec {
	struct pn_dev *dev;
	unsigned int v;
};

struct pn_dev {
	struct pci_dev *pdev;
	void __iomem *bar;
	resource_size_t bar_start;
	struct miscdevice misc;
	char name[16];
	int index;
	struct kref ref;
	/* Held for reading by every path that touches the BAR; remove() takes it for
	 * writing and sets dead. */
	struct rw_semaphore alive;
	bool dead;
	/* Serialises CSR sequences (ctx_sel ...), the context bitmap and node settings. */
	struct mutex lock;
	u32 n_ctx, mtu, table_nodes;
	u64 ctx_map;
	u32 node_id, num_nodes, topo_x, topo_y;
	/* MSI: owners of the contexts, looked up by the handlers. */
	int nvec;
	struct pn_vec *vecs;
	spinlock_t irq_lock;
	struct pn_ctx *owner[PN_MAX_CONTEXTS];
};

enum pn_mode { PN_MODE_NONE, PN_MODE_MAPPED, PN_MODE_KSEND };
enum pn_win_kind { PN_WIN_NONE, PN_WIN_ALLOC, PN_WIN_USER };

struct pn_ctx {
	struct pn_dev *dev;
	struct address_space *mapping;
	int id;
	struct pn_geom geom;
	void *rx, *tx, *status;
	dma_addr_t rx_dma, tx_dma, status_dma;
	struct mutex lock;              /* window, mode, kernel send */
	enum pn_mode mode;
	/* The DMA window (MEM_REGISTER). */
	enum pn_win_kind win_kind;
	u64 win_bytes;                  /* bytes the NIC may read */
	void *win;                      /* PN_WIN_ALLOC */
	dma_addr_t win_dma;
	u64 win_user;                   /* PN_WIN_USER: the registered address */
	struct page **pages;
	unsigned long npages;
	struct sg_table sgt;
	atomic_t win_maps;              /* live mmaps of the window */
	/* Kernel send (semi-user-level mode). */
	u32 pio_posted;
	u8 *sendbuf;
	/* Blocking receive. */
	atomic_t irq_count;
	int irq_seen;
	wait_queue_head_t wq;
	bool quarantined;               /* never quiesced: memory kept, context kept */
};

/* Module parameters (paranic_main.c). */
extern unsigned int pn_rx_log2, pn_tx_log2, pn_window_max_mb, pn_quiesce_ms;

/* The largest window PARANIC_MEM_ALLOC can give: window_max_mb, and without CMA at most
 * one buddy block (4 MiB with 4 KiB pages: 6.1's MAX_ORDER is exclusive). Asking the page
 * allocator for more fails with a WARNING, which user space must not be able to cause
 * (found in the QEMU guest: Debian's kernel has no CMA). */
static inline u64 pn_window_alloc_max(void)
{
	u64 m = (u64)pn_window_max_mb << 20;

	if (!IS_ENABLED(CONFIG_DMA_CMA))
		m = min_t(u64, m, PAGE_SIZE << (MAX_ORDER - 1));
	return m;
}

static inline void pn_csr_write(struct pn_dev *d, u32 off, unsigned int bits, u64 v)
{
	unsigned int i, n = (bits + 31) / 32;

	for (i = 0; i < n; i++) {
		unsigned int shift = 32 * (n - 1 - i);

		iowrite32(shift >= 64 ? 0 : (u32)(v >> shift), d->bar + off + 4 * i);
	}
}

static inline u64 pn_csr_read(struct pn_dev *d, u32 off, unsigned int bits)
{
	unsigned int i, n = (bits + 31) / 32;
	u64 v = 0;

	for (i = 0; i < n; i++)
		v = (v << 32) | ioread32(d->bar + off + 4 * i);
	return v;
}

/*
 * A read that completes with all ones is what a device gone from the bus (surprise
 * removal, link down, a reset FPGA) returns. IDENT never reads so while the device is
 * there; callers that see an all-ones value ask this before trusting it.
 */
static inline bool pn_dev_gone(struct pn_dev *d)
{
	return ioread32(d->bar + PN_CSR_IDENT) != PN_NIC_IDENT;
}

#define PN_CSR_W(d, NAME, v) pn_csr_write(d, PN_CSR_##NAME, PN_CSR_##NAME##_SIZE, v)
#define PN_CSR_R(d, NAME) pn_csr_read(d, PN_CSR_##NAME, PN_CSR_##NAME##_SIZE)

static inline void __iomem *pn_ctx_page(struct pn_ctx *c)
{
	return c->dev->bar + PN_BAR0_CTX_OFFSET + (size_t)c->id * PN_CTX_PAGE_BYTES;
}

static inline u32 pn_status_word(struct pn_ctx *c, unsigned int word)
{
	return le32_to_cpu(READ_ONCE(((__le32 *)c->status)[word]));
}

/* paranic_main.c */
void pn_dev_put(struct pn_dev *d);
void pn_dev_get(struct pn_dev *d);
extern const struct file_operations pn_fops;

/* paranic_ctx.c */
int pn_ctx_open(struct pn_dev *d, struct pn_ctx **out);
void pn_ctx_close(struct pn_ctx *c);
void pn_ctx_disable_all(struct pn_dev *d);
int pn_win_register(struct pn_ctx *c, struct paranic_mem *m);
int pn_win_deregister(struct pn_ctx *c, const struct paranic_mem *m);

#endif /* PARANIC_DRV_H */
