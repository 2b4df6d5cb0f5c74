// SPDX-License-Identifier: GPL-2.0
/*
 * paranic.ko: PCI driver of the ParaNIC board (docs/driver.md).
 *
 * Probe maps BAR0 (context pages at PN_BAR0_CTX_OFFSET, LiteX CSRs at
 * PN_BAR0_CSR_OFFSET, their addresses generated into pn_csr.h from the gateware's
 * CSR map), sets up one MSI/MSI-X vector per context where the platform gives them
 * and registers the misc device /dev/paranic<N> with its sysfs attributes.
 */
#include <linux/delay.h>
#include <linux/dma-mapping.h>
#include <linux/idr.h>
#include <linux/interrupt.h>
#include <linux/module.h>
#include <linux/slab.h>

#include "paranic_drv.h"

unsigned int pn_rx_log2 = 8;
module_param_named(rx_log2, pn_rx_log2, uint, 0644);
MODULE_PARM_DESC(rx_log2, "RX ring slots per context, log2 (1..16, default 8)");
unsigned int pn_tx_log2 = 6;
module_param_named(tx_log2, pn_tx_log2, uint, 0644);
MODULE_PARM_DESC(tx_log2, "TX descriptors per context, log2 (1..16, default 6)");
unsigned int pn_window_max_mb = 64;
module_param_named(window_max_mb, pn_window_max_mb, uint, 0644);
MODULE_PARM_DESC(window_max_mb, "Largest DMA window (MEM_REGISTER) per context, MiB (default 64)");
unsigned int pn_quiesce_ms = 500;
module_param_named(quiesce_ms, pn_quiesce_ms, uint, 0644);
MODULE_PARM_DESC(quiesce_ms, "How long release() waits for a context to go idle, ms (default 500)");

static DEFINE_IDA(pn_ida);

static const struct pci_device_id pn_pci_ids[] = {
	{ PCI_DEVICE(PN_PCI_VENDOR_ID, PN_PCI_DEVICE_ID) },
	{ }
};
MODULE_DEVICE_TABLE(pci, pn_pci_ids);

static void pn_dev_release(struct kref *ref)
{
	struct pn_dev *d = container_of(ref, struct pn_dev, ref);

	pci_dev_put(d->pdev);
	kfree(d);
}

void pn_dev_get(struct pn_dev *d)
{
	kref_get(&d->ref);
}

void pn_dev_put(struct pn_dev *d)
{
	kref_put(&d->ref, pn_dev_release);
}

/* ---- MSI ------------------------------------------------------------------------------- */

static irqreturn_t pn_irq(int irq, void *arg)
{
	struct pn_vec *v = arg;
	struct pn_dev *d = v->dev;
	u32 c;

	spin_lock(&d->irq_lock);
	for (c = v->v; c < d->n_ctx; c += d->nvec) {
		struct pn_ctx *ctx = d->owner[c];

		if (ctx) {
			atomic_inc(&ctx->irq_count);
			wake_up_interruptible(&ctx->wq);
		}
	}
	spin_unlock(&d->irq_lock);
	return IRQ_HANDLED;
}

/* One vector per context if the platform has them, fewer (shared round-robin) if not,
 * none at all (polling only) without MSI: an INTx line cannot say which context. */
static int pn_irq_setup(struct pn_dev *d)
{
	struct pci_dev *pdev = d->pdev;
	int n, i, r;

	n = pci_alloc_irq_vectors(pdev, 1, d->n_ctx, PCI_IRQ_MSIX | PCI_IRQ_MSI);
	if (n < 0) {
		dev_info(&pdev->dev, "no MSI/MSI-X (%d): receive by polling only\n", n);
		d->nvec = 0;
		return 0;
	}
	d->vecs = kcalloc(n, sizeof(*d->vecs), GFP_KERNEL);
	if (!d->vecs) {
		pci_free_irq_vectors(pdev);
		return -ENOMEM;
	}
	for (i = 0; i < n; i++) {
		d->vecs[i].dev = d;
		d->vecs[i].v = i;
		r = request_irq(pci_irq_vector(pdev, i), pn_irq, 0, d->name, &d->vecs[i]);
		if (r) {
			while (--i >= 0)
				free_irq(pci_irq_vector(pdev, i), &d->vecs[i]);
			kfree(d->vecs);
			d->vecs = NULL;
			pci_free_irq_vectors(pdev);
			return r;
		}
	}
	d->nvec = n;
	return 0;
}

static void pn_irq_teardown(struct pn_dev *d)
{
	int i;

	for (i = 0; i < d->nvec; i++)
		free_irq(pci_irq_vector(d->pdev, i), &d->vecs[i]);
	if (d->nvec)
		pci_free_irq_vectors(d->pdev);
	kfree(d->vecs);
	d->vecs = NULL;
	d->nvec = 0;
}

/* ---- sysfs ------------------------------------------------------------------------------- */

static struct pn_dev *pn_from_dev(struct device *dev)
{
	struct miscdevice *misc = dev_get_drvdata(dev);

	return container_of(misc, struct pn_dev, misc);
}

/* Read a CSR for sysfs unless the board is gone (removed, or reading all ones). */
static int pn_sysfs_csr(struct pn_dev *d, u32 off, u32 *val)
{
	int r = -ENODEV;

	down_read(&d->alive);
	if (!d->dead) {
		*val = ioread32(d->bar + off);
		r = *val == 0xffffffff && pn_dev_gone(d) ? -ENODEV : 0;
	}
	up_read(&d->alive);
	return r;
}

static ssize_t node_id_show(struct device *dev, struct device_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%u\n", pn_from_dev(dev)->node_id);
}
static DEVICE_ATTR_RO(node_id);

static ssize_t num_nodes_show(struct device *dev, struct device_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%u\n", pn_from_dev(dev)->num_nodes);
}
static DEVICE_ATTR_RO(num_nodes);

static ssize_t contexts_show(struct device *dev, struct device_attribute *attr, char *buf)
{
	struct pn_dev *d = pn_from_dev(dev);

	return sysfs_emit(buf, "%u %u\n", (u32)hweight64(READ_ONCE(d->ctx_map)), d->n_ctx);
}
static DEVICE_ATTR_RO(contexts);

static ssize_t mtu_show(struct device *dev, struct device_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%u\n", pn_from_dev(dev)->mtu);
}
static DEVICE_ATTR_RO(mtu);

static struct attribute *pn_attrs[] = {
	&dev_attr_node_id.attr,
	&dev_attr_num_nodes.attr,
	&dev_attr_contexts.attr,
	&dev_attr_mtu.attr,
	NULL
};

static const struct attribute_group pn_attr_group = {
	.attrs = pn_attrs,
};

/* counters/<name>: the gateware's 32-bit counters (list generated from the CSR map). */
static ssize_t pn_counter_show(struct device *dev, struct device_attribute *attr, char *buf)
{
	struct dev_ext_attribute *ea = container_of(attr, struct dev_ext_attribute, attr);
	u32 v;
	int r = pn_sysfs_csr(pn_from_dev(dev), (u32)(uintptr_t)ea->var, &v);

	return r ? r : sysfs_emit(buf, "%u\n", v);
}

#define PN_COUNTER_ATTR(name, off) \
	static struct dev_ext_attribute pn_cnt_##name = { \
		__ATTR(name, 0444, pn_counter_show, NULL), (void *)(uintptr_t)(off) };
PN_CSR_COUNTERS(PN_COUNTER_ATTR)
#define PN_COUNTER_PTR(name, off) &pn_cnt_##name.attr.attr,
static struct attribute *pn_counter_attrs[] = { PN_CSR_COUNTERS(PN_COUNTER_PTR) NULL };

static const struct attribute_group pn_counter_group = {
	.name = "counters",
	.attrs = pn_counter_attrs,
};

/* links/link<N>: training, seen, up or down. */
static ssize_t pn_link_show(struct device *dev, struct device_attribute *attr, char *buf)
{
	static const char *const names[] = PN_LINK_STATE_NAMES;
	struct dev_ext_attribute *ea = container_of(attr, struct dev_ext_attribute, attr);
	u32 v;
	int r = pn_sysfs_csr(pn_from_dev(dev), (u32)(uintptr_t)ea->var, &v);

	if (r)
		return r;
	if (v < ARRAY_SIZE(names))
		return sysfs_emit(buf, "%s\n", names[v]);
	return sysfs_emit(buf, "%u\n", v);
}

#define PN_LINK_ATTR(port, off) \
	static struct dev_ext_attribute pn_link_##port = { \
		__ATTR(link##port, 0444, pn_link_show, NULL), (void *)(uintptr_t)(off) };
PN_CSR_LINK_STATES(PN_LINK_ATTR)
#define PN_LINK_PTR(port, off) &pn_link_##port.attr.attr,

/* links/link<N>_down_reason, links/link<N>_downs: why a link went down and how often
 * (the link layer's fault CSRs; the list is generated from the CSR map, empty on gateware
 * without them). */
static ssize_t __maybe_unused pn_link_u32_show(struct device *dev, struct device_attribute *attr,
						char *buf)
{
	struct dev_ext_attribute *ea = container_of(attr, struct dev_ext_attribute, attr);
	u32 v;
	int r = pn_sysfs_csr(pn_from_dev(dev), (u32)(uintptr_t)ea->var, &v);

	return r ? r : sysfs_emit(buf, "%u\n", v);
}

#define PN_FAULT_ATTR(port, reason, downs) \
	static struct dev_ext_attribute pn_link_reason_##port = { \
		__ATTR(link##port##_down_reason, 0444, pn_link_u32_show, NULL), (void *)(uintptr_t)(reason) }; \
	static struct dev_ext_attribute pn_link_downs_##port = { \
		__ATTR(link##port##_downs, 0444, pn_link_u32_show, NULL), (void *)(uintptr_t)(downs) };
PN_CSR_LINK_FAULTS(PN_FAULT_ATTR)
#define PN_FAULT_PTR(port, reason, downs) &pn_link_reason_##port.attr.attr, &pn_link_downs_##port.attr.attr,

static struct attribute *pn_link_attrs[] = {
	PN_CSR_LINK_STATES(PN_LINK_PTR)
	PN_CSR_LINK_FAULTS(PN_FAULT_PTR)
	NULL
};

static const struct attribute_group pn_link_group = {
	.name = "links",
	.attrs = pn_link_attrs,
};

/* firmware/<name>: the firmware's status registers (fw_*, paranic/spec/fw.py) and the
 * identity inputs (id_*): state and error by name, topo and coords as "x y", dna in hex,
 * the rest in decimal. 0 / "none" on a board without firmware. */
struct pn_fw_attr {
	struct device_attribute attr;
	u32 off;
	u32 bits;
};

static ssize_t pn_fw_show(struct device *dev, struct device_attribute *attr, char *buf)
{
	static const char *const states[] = PN_FW_STATE_NAMES;
	static const char *const errors[] = PN_FW_ERROR_NAMES;
	struct pn_fw_attr *fa = container_of(attr, struct pn_fw_attr, attr);
	struct pn_dev *d = pn_from_dev(dev);
	const char *name = attr->attr.name;
	u32 v, lo;
	int r = pn_sysfs_csr(d, fa->off, &v);

	if (r)
		return r;
	if (fa->bits > 32) {   /* 64-bit CSR: most significant word first */
		r = pn_sysfs_csr(d, fa->off + 4, &lo);
		return r ? r : sysfs_emit(buf, "0x%016llx\n", (unsigned long long)v << 32 | lo);
	}
	if (!strcmp(name, "state") && v < ARRAY_SIZE(states))
		return sysfs_emit(buf, "%s\n", states[v]);
	if (!strcmp(name, "error") && v < ARRAY_SIZE(errors))
		return sysfs_emit(buf, "%s\n", errors[v]);
	if (!strcmp(name, "topo") || !strcmp(name, "coords"))
		return sysfs_emit(buf, "%u %u\n", v & 0xffff, v >> 16);
	if (!strcmp(name, "fingerprint") || !strcmp(name, "cfg_node"))
		return sysfs_emit(buf, "0x%x\n", v);
	return sysfs_emit(buf, "%u\n", v);
}

#define PN_FW_ATTR(name, off, bits) \
	static struct pn_fw_attr pn_fw_##name = { __ATTR(name, 0444, pn_fw_show, NULL), (off), (bits) };
PN_CSR_FW(PN_FW_ATTR)
PN_CSR_ID(PN_FW_ATTR)
/* firmware/node: the node CSR itself (the firmware may have set it; node_id above is
 * what SET_NODE_ID last wrote). */
PN_FW_ATTR(node, PN_CSR_NODE, PN_CSR_NODE_SIZE)
#define PN_FW_PTR(name, off, bits) &pn_fw_##name.attr.attr,
static struct attribute *pn_fw_attrs[] = {
	PN_CSR_FW(PN_FW_PTR) PN_CSR_ID(PN_FW_PTR) PN_FW_PTR(node, 0, 0) NULL
};

static const struct attribute_group pn_fw_group = {
	.name = "firmware",
	.attrs = pn_fw_attrs,
};

static const struct attribute_group *pn_groups[] = {
	&pn_attr_group,
	&pn_counter_group,
	&pn_link_group,
	&pn_fw_group,
	NULL
};

/* ---- probe / remove ------------------------------------------------------------------------ */

static int pn_probe(struct pci_dev *pdev, const struct pci_device_id *id)
{
	struct pn_dev *d;
	int r;

	/* A context page must be a whole MMU page, or mmap would expose its neighbours. */
	if (PAGE_SIZE != PN_CTX_PAGE_BYTES) {
		dev_err(&pdev->dev, "needs %d-byte pages (have %lu)\n", PN_CTX_PAGE_BYTES, PAGE_SIZE);
		return -ENODEV;
	}
	r = pcim_enable_device(pdev);
	if (r)
		return r;
	if (!(pci_resource_flags(pdev, 0) & IORESOURCE_MEM) ||
	    pci_resource_len(pdev, 0) < PN_BAR0_CSR_OFFSET + PN_BAR0_CSR_BYTES) {
		dev_err(&pdev->dev, "BAR0 too small or not memory\n");
		return -ENODEV;
	}
	r = pcim_iomap_regions(pdev, BIT(0), PN_DRV_NAME);
	if (r)
		return r;
	r = dma_set_mask_and_coherent(&pdev->dev, DMA_BIT_MASK(64));
	if (r)
		r = dma_set_mask_and_coherent(&pdev->dev, DMA_BIT_MASK(32));
	if (r)
		return r;
	pci_set_master(pdev);

	d = kzalloc(sizeof(*d), GFP_KERNEL);
	if (!d)
		return -ENOMEM;
	kref_init(&d->ref);
	init_rwsem(&d->alive);
	mutex_init(&d->lock);
	spin_lock_init(&d->irq_lock);
	d->pdev = pci_dev_get(pdev);
	d->bar = pcim_iomap_table(pdev)[0];
	d->bar_start = pci_resource_start(pdev, 0);
	d->table_nodes = 1u << PN_CSR_ROUTER_ROUTE_ADR_SIZE;
	/* The gateware says what it is before anything else in pn_csr.h is trusted. */
	if (PN_CSR_R(d, IDENT) != PN_NIC_IDENT) {
		dev_err(&pdev->dev, "BAR0 ident %08x is not a ParaNIC (%08x)\n",
			(u32)PN_CSR_R(d, IDENT), PN_NIC_IDENT);
		r = -ENODEV;
		goto put;
	}
	d->n_ctx = PN_CSR_R(d, HOST_INFO_N_CTX);
	d->mtu = PN_CSR_R(d, HOST_INFO_MTU);
	d->num_nodes = 0;
	d->topo_x = d->topo_y = 0;
	d->node_id = PN_CSR_R(d, NODE);
	/* A gateware whose CSR map differs from pn_csr.h reads nonsense here. */
	if (d->n_ctx == 0 || d->n_ctx > PN_MAX_CONTEXTS || d->mtu < 8 || d->mtu > PN_MAX_MTU ||
	    d->mtu % 8) {
		dev_err(&pdev->dev, "unexpected n_ctx %u / mtu %u: gateware does not match CSR map %llx\n",
			d->n_ctx, d->mtu, PN_CSR_MAP_ID);
		r = -ENODEV;
		goto put;
	}
	r = ida_alloc(&pn_ida, GFP_KERNEL);
	if (r < 0)
		goto put;
	d->index = r;
	snprintf(d->name, sizeof(d->name), PN_DRV_NAME "%d", d->index);
	r = pn_irq_setup(d);
	if (r)
		goto ida;
	d->misc.minor = MISC_DYNAMIC_MINOR;
	d->misc.name = d->name;
	d->misc.fops = &pn_fops;
	d->misc.parent = &pdev->dev;
	d->misc.groups = pn_groups;
	d->misc.mode = 0666;    /* any user may take a context; admin ioctls need CAP_NET_ADMIN */
	r = misc_register(&d->misc);
	if (r)
		goto irq;
	pci_set_drvdata(pdev, d);
	dev_info(&pdev->dev, "%s: gateware version %u, %u contexts, MTU %u, %d MSI vectors, CSR map %llx\n",
		 d->name, (u32)PN_CSR_R(d, VERSION), d->n_ctx, d->mtu, d->nvec, PN_CSR_MAP_ID);
	return 0;
irq:
	pn_irq_teardown(d);
ida:
	ida_free(&pn_ida, d->index);
put:
	pn_dev_put(d);
	return r;
}

static void pn_remove(struct pci_dev *pdev)
{
	struct pn_dev *d = pci_get_drvdata(pdev);
	struct address_space *maps[PN_MAX_CONTEXTS];
	unsigned long flags;
	int i, n = 0;

	misc_deregister(&d->misc);
	/* No new users; stop the NIC for the ones still open and take their mappings of
	 * BAR0 away before pcim unmaps it. Their files live on until closed. */
	down_write(&d->alive);
	pn_ctx_disable_all(d);
	d->dead = true;
	spin_lock_irqsave(&d->irq_lock, flags);
	for (i = 0; i < PN_MAX_CONTEXTS; i++) {
		if (d->owner[i]) {
			maps[n++] = d->owner[i]->mapping;
			wake_up_interruptible(&d->owner[i]->wq);   /* poll() sees EPOLLHUP */
		}
	}
	spin_unlock_irqrestore(&d->irq_lock, flags);
	up_write(&d->alive);
	for (i = 0; i < n; i++)
		unmap_mapping_range(maps[i], PARANIC_MMAP_CTX_PAGE, PN_CTX_PAGE_BYTES, 1);
	pn_irq_teardown(d);
	ida_free(&pn_ida, d->index);
	pn_dev_put(d);
}

static struct pci_driver pn_pci_driver = {
	.name = PN_DRV_NAME,
	.id_table = pn_pci_ids,
	.probe = pn_probe,
	.remove = pn_remove,
};
module_pci_driver(pn_pci_driver);

MODULE_DESCRIPTION("ParaNIC FPGA cluster interconnect");
MODULE_AUTHOR("The ParaNIC project");
MODULE_LICENSE("GPL");
