/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The `pci` backend: one hardware context of a real board through paranic.ko
 * (driver/, docs/driver.md).
 *
 * open(/dev/paranic<N>) claims a context; GET_INFO gives its shape; mmap hands out
 * the context page (uncached MMIO: doorbells, PIO window, registers), the RX ring and
 * status block (read-only) and the TX ring. The context's single DMA window is a
 * driver-allocated coherent buffer (MEM_REGISTER with PARANIC_MEM_ALLOC) mapped here
 * as the DMA heap: pn_dma_alloc carves buffers out of it, and pn_mem_register accepts
 * memory inside it. Other user memory cannot be registered (-EFAULT; pn_send then
 * copies through the bounce buffer): the NIC has one contiguous window per context.
 *
 * Device: $PARANIC_DEVICE (a path, or N for /dev/paranic<N>), default /dev/paranic0.
 * Heap: $PARANIC_DMA_HEAP bytes (default 16 MiB, at most the driver's window_max).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "hal_backend.h"
#include "../../driver/include/uapi/paranic.h"

#define PCI_DEFAULT_HEAP (16u << 20)

struct pci_blk {
	size_t off, len;
};

struct pci_be {
	int fd;
	struct paranic_info info;
	void *page, *rx, *tx, *status, *heap;
	size_t rx_len, tx_len, status_len, heap_len;
	uint64_t heap_dma;
	struct pci_blk *blk;   /* allocated blocks in address order */
	int nblk, cap;
};

static struct pci_be *BE(pn_hal_t *h)
{
	return (struct pci_be *)h->be;
}

/* ---- MMIO: plain loads and stores on the uncached page ------------------------------------ */

static void pci_mmio_write32(pn_hal_t *h, uint32_t off, uint32_t v)
{
	pn_wmb();
	*(volatile uint32_t *)((uint8_t *)BE(h)->page + off) = v;
}

static void pci_mmio_write64(pn_hal_t *h, uint32_t off, uint64_t v)
{
	*(volatile uint64_t *)((uint8_t *)BE(h)->page + off) = v;
}

static uint32_t pci_mmio_read32(pn_hal_t *h, uint32_t off)
{
	return *(volatile uint32_t *)((uint8_t *)BE(h)->page + off);
}

/* pn_alive: a device that fell off the bus (surprise removal, a dead link) answers every
 * read with all-ones; the status register's reserved bits read 0 on a live one. One
 * MMIO read (about 1 us), asked only every PN_ALIVE_EVERY rounds of a wait loop. */
static int pci_alive(pn_hal_t *h)
{
	return pci_mmio_read32(h, PN_REG_STATUS) == 0xffffffffu ? -ENODEV : 0;
}

/* ---- the DMA heap (the context's window) ------------------------------------------------ */

static size_t align_up(size_t v, size_t a)
{
	return (v + a - 1) & ~(a - 1);
}

static int pci_dma_alloc(pn_hal_t *h, size_t len, void **va, uint64_t *dma)
{
	struct pci_be *b = BE(h);
	size_t align = len >= 4096 ? 4096 : 64, need = align_up(len ? len : 1, 64), prev = 0;
	int at;

	if (need < len || need > b->heap_len)
		return -ENOMEM;
	for (at = 0; at <= b->nblk; at++) {
		size_t s = align_up(prev, align), e = at < b->nblk ? b->blk[at].off : b->heap_len;
		if (s <= e && need <= e - s) {
			prev = s;
			break;
		}
		if (at < b->nblk)
			prev = b->blk[at].off + b->blk[at].len;
	}
	if (at > b->nblk)
		return -ENOMEM;
	if (b->nblk == b->cap) {
		int nc = b->cap ? 2 * b->cap : 16;
		struct pci_blk *nb = realloc(b->blk, (size_t)nc * sizeof(*nb));
		if (!nb)
			return -ENOMEM;
		b->blk = nb;
		b->cap = nc;
	}
	memmove(&b->blk[at + 1], &b->blk[at], (size_t)(b->nblk - at) * sizeof(*b->blk));
	b->blk[at] = (struct pci_blk){prev, need};
	b->nblk++;
	memset((uint8_t *)b->heap + prev, 0, len);
	*va = (uint8_t *)b->heap + prev;
	*dma = b->heap_dma + prev;
	return 0;
}

static int pci_dma_free(pn_hal_t *h, void *va, size_t len)
{
	struct pci_be *b = BE(h);
	size_t off = (size_t)((uint8_t *)va - (uint8_t *)b->heap);

	(void)len;
	for (int i = 0; i < b->nblk; i++)
		if (b->blk[i].off == off) {
			memmove(&b->blk[i], &b->blk[i + 1], (size_t)(b->nblk - i - 1) * sizeof(*b->blk));
			b->nblk--;
			return 0;
		}
	return -ENOENT;
}

static int pci_mem_register(pn_hal_t *h, void *va, size_t len, uint64_t *dma)
{
	struct pci_be *b = BE(h);
	uint8_t *p = va, *heap = b->heap;

	if (p < heap || p > heap + b->heap_len || len > (size_t)(heap + b->heap_len - p))
		return -EFAULT;   /* outside the window: see the header comment */
	*dma = b->heap_dma + (uint64_t)(p - heap);
	return 0;
}

static int pci_mem_deregister(pn_hal_t *h, void *va, size_t len)
{
	(void)h;
	(void)va;
	(void)len;
	return 0;
}

/* ---- attach / detach --------------------------------------------------------------------- */

static void pci_release(struct pci_be *b)
{
	if (b->page)
		munmap(b->page, PN_CTX_PAGE_BYTES);
	if (b->rx)
		munmap(b->rx, b->rx_len);
	if (b->tx)
		munmap(b->tx, b->tx_len);
	if (b->status)
		munmap(b->status, b->status_len);
	if (b->heap)
		munmap(b->heap, b->heap_len);
	if (b->fd >= 0)
		close(b->fd);   /* the driver quiesces and reclaims the context */
	free(b->blk);
	free(b);
}

static void *pci_map(struct pci_be *b, size_t len, int prot, uint64_t off)
{
	void *p = mmap(NULL, len, prot, MAP_SHARED, b->fd, (off_t)off);
	return p == MAP_FAILED ? NULL : p;
}

static int pci_device_path(char *path, size_t n)
{
	const char *d = getenv("PARANIC_DEVICE");
	int r;

	if (!d || !*d)
		d = "0";
	if (strspn(d, "0123456789") == strlen(d))
		r = snprintf(path, n, "/dev/paranic%s", d);
	else
		r = snprintf(path, n, "%s", d);
	return r < 0 || (size_t)r >= n ? -ENAMETOOLONG : 0;
}

static int pci_attach(pn_hal_t *h, const pn_open_opts_t *o, struct pn_hw_map *map)
{
	struct paranic_mem m;
	struct pci_be *b;
	char path[256];
	uint64_t heap = PCI_DEFAULT_HEAP;
	const char *hs = getenv("PARANIC_DMA_HEAP");
	int r;

	if ((r = pci_device_path(path, sizeof(path))) < 0)
		return r;
	if (hs && *hs) {
		char *end;
		errno = 0;
		heap = strtoull(hs, &end, 0);
		if (errno || *end || heap < 4096)
			return -EINVAL;
	}
	b = calloc(1, sizeof(*b));
	if (!b)
		return -ENOMEM;
	b->fd = open(path, O_RDWR | O_CLOEXEC);
	if (b->fd < 0) {
		r = -errno;
		if (r == -ENOENT || r == -ENXIO || r == -ENODEV) {
			fprintf(stderr, "libparanic: pci backend: no ParaNIC at %s (%s): load paranic.ko "
				"on a node with a board, or choose one with PARANIC_DEVICE\n", path, strerror(-r));
			r = -ENODEV;
		}
		pci_release(b);
		return r;
	}
	if (ioctl(b->fd, PARANIC_IOC_GET_INFO, &b->info) < 0) {
		r = -errno;
		pci_release(b);
		return r;
	}
	const struct paranic_info *in = &b->info;
	if (in->abi_version != PARANIC_ABI_VERSION) {
		fprintf(stderr, "libparanic: pci backend: driver ABI %u, library ABI %u\n", in->abi_version,
			PARANIC_ABI_VERSION);
		pci_release(b);
		return -EPROTO;
	}
	/* The board decides the shape; a caller asking for another one gets -EBUSY, as
	 * with a sim cluster of another shape. */
	if ((o->mtu && (uint32_t)o->mtu != in->mtu) || (o->contexts && (uint32_t)o->contexts != in->n_ctx) ||
	    (o->rx_slots && (uint32_t)o->rx_slots != in->rx_slots) ||
	    (o->tx_entries && (uint32_t)o->tx_entries != in->tx_entries) ||
	    (o->ctx != PN_CTX_ANY && (uint32_t)o->ctx != in->ctx_id)) {
		pci_release(b);
		return -EBUSY;
	}
	/* A node outside the board's cluster is refused as by sw and sim; inside it the
	 * board's own id (SET_NODE_ID) wins over $PARANIC_NODE. */
	if (in->num_nodes && (uint32_t)o->node >= in->num_nodes) {
		pci_release(b);
		return -EINVAL;
	}
	memset(&m, 0, sizeof(m));
	m.len = heap < in->window_max ? heap : in->window_max;
	m.flags = PARANIC_MEM_ALLOC;
	b->rx_len = in->rx_bytes;
	b->tx_len = in->tx_bytes;
	b->status_len = 4096;
	b->page = pci_map(b, PN_CTX_PAGE_BYTES, PROT_READ | PROT_WRITE, PARANIC_MMAP_CTX_PAGE);
	b->rx = pci_map(b, b->rx_len, PROT_READ, PARANIC_MMAP_RX_RING);
	b->tx = pci_map(b, b->tx_len, PROT_READ | PROT_WRITE, PARANIC_MMAP_TX_RING);
	b->status = pci_map(b, b->status_len, PROT_READ, PARANIC_MMAP_STATUS);
	if (!b->page || !b->rx || !b->tx || !b->status || ioctl(b->fd, PARANIC_IOC_MEM_REGISTER, &m) < 0) {
		r = -errno;
		pci_release(b);
		return r ? r : -EIO;
	}
	b->heap_len = m.len;
	b->heap_dma = m.dma;
	b->heap = pci_map(b, b->heap_len, PROT_READ | PROT_WRITE, m.mmap_offset);
	if (!b->heap) {
		r = -errno;
		pci_release(b);
		return r;
	}
	memset(map, 0, sizeof(*map));
	map->ctx_page = b->page;
	map->rx_ring = b->rx;
	map->rx_slots = in->rx_slots;
	map->rx_slot_bytes = in->rx_slot_bytes;
	map->tx_ring = b->tx;
	map->tx_entries = in->tx_entries;
	map->status = b->status;
	map->mtu = in->mtu;
	map->node_id = in->node_id;
	map->num_nodes = in->num_nodes ? in->num_nodes : 1;
	map->ctx_id = in->ctx_id;
	map->num_ctx = in->n_ctx;
	h->be = b;
	return 0;
}

static void pci_detach(pn_hal_t *h)
{
	if (h->be)
		pci_release(BE(h));
	h->be = NULL;
}

/* ---- pn_cluster_status: the driver's sysfs attributes (docs/driver.md) -------------------- */

/* One sysfs attribute of the board: 0 and its text (newline cut), or -errno. */
static int pci_sysfs_read(const char *dir, const char *attr, char *buf, size_t n)
{
	char path[512];
	ssize_t got;
	int fd;

	if (snprintf(path, sizeof(path), "%s/%s", dir, attr) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	got = read(fd, buf, n - 1);
	close(fd);
	if (got < 0)
		return -errno;
	buf[got] = 0;
	buf[strcspn(buf, "\n")] = 0;
	return 0;
}

/* A number (any base strtoull takes), or the index of its text in names[]. */
static int pci_sysfs_u64(const char *dir, const char *attr, const char *const *names, size_t nnames,
			 uint64_t *v)
{
	char buf[64], *end;
	size_t i;
	int r = pci_sysfs_read(dir, attr, buf, sizeof(buf));

	if (r)
		return r;
	for (i = 0; names && i < nnames; i++)
		if (!strcmp(buf, names[i])) {
			*v = i;
			return 0;
		}
	errno = 0;
	*v = strtoull(buf, &end, 0);
	return errno || end == buf ? -EIO : 0;
}

static int pci_node_status(pn_hal_t *h, unsigned index, pn_node_status_t *out)
{
	static const char *const fw_names[] = PN_FW_REG_NAMES;
	static const char *const states[] = PN_FW_STATE_NAMES;
	static const char *const errors[] = PN_FW_ERROR_NAMES;
	static const char *const lstates[] = PN_LINK_STATE_NAMES;
	char dev[256], dir[320], attr[64], buf[64];
	uint32_t fw[PN_FW_REGS];
	uint64_t v;
	unsigned i, p;
	const char *base;
	int r;

	(void)h;
	if (index > 0)
		return -ENOENT;   /* a board sees itself only */
	r = pci_device_path(dev, sizeof(dev));
	if (r)
		return r;
	base = strrchr(dev, '/') ? strrchr(dev, '/') + 1 : dev;
	snprintf(dir, sizeof(dir), "/sys/class/misc/%s", base);
	r = pci_sysfs_u64(dir, "firmware/node", NULL, 0, &v);   /* the node CSR */
	if (r)
		r = pci_sysfs_u64(dir, "node_id", NULL, 0, &v);    /* older driver: SET_NODE_ID's */
	if (r)
		return r;
	out->node_id = (uint32_t)v;
	/* firmware/: present with gateware that has the fw_* registers. */
	_Static_assert(sizeof(fw_names) / sizeof(fw_names[0]) == PN_FW_REGS, "fw_* names");
	for (i = 0; i < PN_FW_REGS; i++) {
		snprintf(attr, sizeof(attr), "firmware/%s", fw_names[i]);
		if (i == PN_FW_REG_TOPO || i == PN_FW_REG_COORDS) {   /* "x y" */
			unsigned x = 0, y = 0;   /* unread when the attribute is missing (r set) */
			r = pci_sysfs_read(dir, attr, buf, sizeof(buf));
			if (!r && sscanf(buf, "%u %u", &x, &y) != 2)
				r = -EIO;
			v = (uint64_t)x | (uint64_t)y << 16;
		} else if (i == PN_FW_REG_STATE) {
			r = pci_sysfs_u64(dir, attr, states, sizeof(states) / sizeof(states[0]), &v);
		} else if (i == PN_FW_REG_ERROR) {
			r = pci_sysfs_u64(dir, attr, errors, sizeof(errors) / sizeof(errors[0]), &v);
		} else {
			r = pci_sysfs_u64(dir, attr, NULL, 0, &v);
		}
		if (r)
			break;
		fw[i] = (uint32_t)v;
	}
	if (!r)
		pn_fill_fw_status(out, fw);
	if (!pci_sysfs_u64(dir, "firmware/dna", NULL, 0, &v))
		out->dna = v;
	if (!pci_sysfs_u64(dir, "firmware/cfg_node", NULL, 0, &v))
		out->cfg_node = (uint32_t)v;
	for (p = 0; p < PN_STATUS_LINKS; p++) {
		pn_link_status_t *l = &out->links[p];
		static const char *const ctr[] = {"tx_packets", "rx_packets", "crc_errors", "replays", "timeouts"};
		uint32_t *dst[] = {&l->tx_packets, &l->rx_packets, &l->crc_errors, &l->replays, &l->timeouts};
		uint64_t reason, downs;

		snprintf(attr, sizeof(attr), "links/link%u", p);
		if (pci_sysfs_u64(dir, attr, lstates, sizeof(lstates) / sizeof(lstates[0]), &v))
			break;
		l->port = p + 1;
		l->state = (uint32_t)v;
		for (i = 0; i < sizeof(ctr) / sizeof(ctr[0]); i++) {
			snprintf(attr, sizeof(attr), "counters/link%u_%s", p, ctr[i]);
			if (!pci_sysfs_u64(dir, attr, NULL, 0, &v))
				*dst[i] = (uint32_t)v;
		}
		snprintf(attr, sizeof(attr), "links/link%u_down_reason", p);
		r = pci_sysfs_u64(dir, attr, NULL, 0, &reason);
		snprintf(attr, sizeof(attr), "links/link%u_downs", p);
		if (!r && !pci_sysfs_u64(dir, attr, NULL, 0, &downs)) {
			l->down_reason = (uint32_t)reason;
			l->downs = (uint32_t)downs;
			l->flags |= PN_LINK_HAVE_FAULTS;
		}
		out->n_links = p + 1;
	}
	return 0;
}

const struct pn_backend_ops pn_backend_pci = {
	.name = "pci",
	.attach = pci_attach,
	.detach = pci_detach,
	.mmio_write32 = pci_mmio_write32,
	.mmio_write64 = pci_mmio_write64,
	.mmio_read32 = pci_mmio_read32,
	.alive = pci_alive,
	.dma_alloc = pci_dma_alloc,
	.dma_free = pci_dma_free,
	.mem_register = pci_mem_register,
	.mem_deregister = pci_mem_deregister,
	.progress = NULL,
	.now_ns = NULL,
	.cycles = NULL,
	.counters = NULL,
	.node_status = pci_node_status,
};
