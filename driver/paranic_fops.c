// SPDX-License-Identifier: GPL-2.0
/*
 * /dev/paranic<N>: one open file holds one hardware context.
 *
 * mmap hands out only that context's MMIO page (uncached), its rings and status
 * block (coherent memory; RX ring and status block read-only) and its allocated
 * DMA window; ioctls and write() are checked by pn_logic.c before anything touches
 * the hardware.
 */
#include <linux/capability.h>
#include <linux/delay.h>
#include <linux/dma-mapping.h>
#include <linux/fs.h>
#include <linux/mm.h>
#include <linux/poll.h>
#include <linux/sched/signal.h>
#include <linux/slab.h>
#include <linux/uaccess.h>

#include "paranic_drv.h"

static int pn_open(struct inode *inode, struct file *f)
{
	struct miscdevice *misc = f->private_data;   /* set by the misc core */
	struct pn_dev *d = container_of(misc, struct pn_dev, misc);
	struct pn_ctx *c;
	int r;

	down_read(&d->alive);
	if (d->dead) {
		up_read(&d->alive);
		return -ENODEV;
	}
	r = pn_ctx_open(d, &c);
	if (!r)
		pn_dev_get(d);
	up_read(&d->alive);
	if (r)
		return r;
	c->mapping = f->f_mapping;
	f->private_data = c;
	return stream_open(inode, f);
}

static int pn_release(struct inode *inode, struct file *f)
{
	struct pn_ctx *c = f->private_data;
	struct pn_dev *d = c->dev;

	pn_ctx_close(c);
	pn_dev_put(d);
	return 0;
}

/* ---- mmap ------------------------------------------------------------------------------- */

static void pn_win_vm_open(struct vm_area_struct *vma)
{
	struct pn_ctx *c = vma->vm_private_data;

	atomic_inc(&c->win_maps);
}

static void pn_win_vm_close(struct vm_area_struct *vma)
{
	struct pn_ctx *c = vma->vm_private_data;

	atomic_dec(&c->win_maps);
}

static const struct vm_operations_struct pn_win_vm_ops = {
	.open = pn_win_vm_open,
	.close = pn_win_vm_close,
};

static int pn_mmap(struct file *f, struct vm_area_struct *vma)
{
	struct pn_ctx *c = f->private_data;
	struct pn_dev *d = c->dev;
	struct device *dev = &d->pdev->dev;
	unsigned long len = vma->vm_end - vma->vm_start;
	u64 off = (u64)vma->vm_pgoff << PAGE_SHIFT;
	int region, r;

	if (vma->vm_pgoff > (~0ULL >> PAGE_SHIFT))
		return -EINVAL;
	mutex_lock(&c->lock);
	region = pn_mmap_check(&c->geom, off, len, c->win_kind == PN_WIN_ALLOC ? c->win_bytes : 0,
			       !!(vma->vm_flags & VM_WRITE), PAGE_SIZE);
	if (region < 0) {
		r = region;
		goto out;
	}
	/* Not inherited by fork() children, never grown, not in core dumps. */
	vma->vm_flags |= VM_DONTCOPY | VM_DONTEXPAND | VM_DONTDUMP;
	if (region == PN_R_RX || region == PN_R_STATUS)
		vma->vm_flags &= ~VM_MAYWRITE;
	vma->vm_pgoff = 0;
	switch (region) {
	case PN_R_CTX_PAGE:
		r = -EBUSY;
		if (c->mode == PN_MODE_KSEND)
			goto out;
		down_read(&d->alive);
		r = -ENODEV;
		if (!d->dead) {
			vma->vm_page_prot = pgprot_noncached(vma->vm_page_prot);
			vma->vm_flags |= VM_IO;
			r = io_remap_pfn_range(vma, vma->vm_start,
					       (d->bar_start + PN_BAR0_CTX_OFFSET +
						(u64)c->id * PN_CTX_PAGE_BYTES) >> PAGE_SHIFT,
					       PAGE_SIZE, vma->vm_page_prot);
		}
		up_read(&d->alive);
		if (!r)
			c->mode = PN_MODE_MAPPED;
		break;
	case PN_R_RX:
		r = dma_mmap_coherent(dev, vma, c->rx, c->rx_dma, c->geom.rx_bytes);
		break;
	case PN_R_TX:
		r = dma_mmap_coherent(dev, vma, c->tx, c->tx_dma, c->geom.tx_bytes);
		break;
	case PN_R_STATUS:
		r = dma_mmap_coherent(dev, vma, c->status, c->status_dma, c->geom.status_bytes);
		break;
	case PN_R_WINDOW:
		r = dma_mmap_coherent(dev, vma, c->win, c->win_dma, c->win_bytes);
		if (!r) {
			vma->vm_private_data = c;
			vma->vm_ops = &pn_win_vm_ops;
			pn_win_vm_open(vma);
		}
		break;
	default:
		r = -EINVAL;
	}
out:
	mutex_unlock(&c->lock);
	return r;
}

/* ---- kernel send (semi-user-level mode) -------------------------------------------------- */

/*
 * Wait until the PIO window is free: pio_done has caught up with our doorbells. Bounded
 * by quiesce_ms and by fatal signals; a device that reads all ones (gone) ends it with
 * -ENODEV, checked about every 64 polls (an MMIO read each time would slow the wait).
 */
static int pn_pio_wait(struct pn_ctx *c, bool nonblock)
{
	unsigned long end = jiffies + msecs_to_jiffies(pn_quiesce_ms);
	unsigned int n = 0;

	while (!pn_count_reached(pn_status_word(c, PN_STS_PIO_DONE_WORD), c->pio_posted)) {
		if (nonblock)
			return -EAGAIN;
		if (fatal_signal_pending(current))
			return -EINTR;
		if (++n % 64 == 1 && pn_dev_gone(c->dev))
			return -ENODEV;
		if (time_after(jiffies, end))
			return pn_dev_gone(c->dev) ? -ENODEV : -ETIMEDOUT;
		usleep_range(2, 20);
	}
	return 0;
}

/* One checked packet: header built here (the NIC stamps the source), payload from user. */
static ssize_t pn_send(struct pn_ctx *c, const struct paranic_send *s, const void __user *payload,
		       bool nonblock)
{
	struct pn_dev *d = c->dev;
	u64 hdr[2];
	void __iomem *win;
	size_t i, words;
	int r;

	r = pn_send_build(s, d->mtu, hdr);
	if (r)
		return r;
	mutex_lock(&c->lock);
	r = -EBUSY;
	if (c->mode == PN_MODE_MAPPED)
		goto out;
	c->mode = PN_MODE_KSEND;
	r = -ENOMEM;
	if (!c->sendbuf)
		c->sendbuf = kzalloc(PN_PIO_WINDOW_BYTES, GFP_KERNEL);
	if (!c->sendbuf)
		goto out;
	words = (s->length + 7) / 8;
	memset(c->sendbuf, 0, words * 8);
	r = -EFAULT;
	if (s->length && copy_from_user(c->sendbuf, payload, s->length))
		goto out;
	down_read(&d->alive);
	r = -ENODEV;
	if (d->dead)
		goto unlock;
	r = pn_pio_wait(c, nonblock);
	if (r)
		goto unlock;
	win = pn_ctx_page(c) + PN_PIO_WINDOW_OFFSET;
	writeq(hdr[0], win);
	writeq(hdr[1], win + 8);
	for (i = 0; i < words; i++)
		writeq(le64_to_cpu(((__le64 *)c->sendbuf)[i]), win + PN_HEADER_BYTES + 8 * i);
	wmb();   /* the window before the doorbell */
	writel(PN_HEADER_BYTES + s->length, pn_ctx_page(c) + PN_REG_PIO_DOORBELL);
	c->pio_posted++;
	r = s->length;
unlock:
	up_read(&d->alive);
out:
	mutex_unlock(&c->lock);
	return r;
}

/* write(): a struct paranic_send (payload = 0) followed by exactly length bytes. */
static ssize_t pn_write(struct file *f, const char __user *buf, size_t count, loff_t *ppos)
{
	struct pn_ctx *c = f->private_data;
	struct paranic_send s;
	ssize_t r;

	if (count < sizeof(s))
		return -EINVAL;
	if (copy_from_user(&s, buf, sizeof(s)))
		return -EFAULT;
	if (s.payload || count - sizeof(s) != s.length)
		return -EINVAL;
	r = pn_send(c, &s, buf + sizeof(s), f->f_flags & O_NONBLOCK);
	return r < 0 ? r : (ssize_t)count;
}

/* ---- ioctl ------------------------------------------------------------------------------- */

static int pn_get_info(struct pn_ctx *c, void __user *arg)
{
	struct pn_dev *d = c->dev;
	struct paranic_info in;

	memset(&in, 0, sizeof(in));
	in.abi_version = PARANIC_ABI_VERSION;
	mutex_lock(&d->lock);
	in.node_id = d->node_id;
	in.num_nodes = d->num_nodes;
	in.topo_x = d->topo_x;
	in.topo_y = d->topo_y;
	mutex_unlock(&d->lock);
	in.n_ctx = d->n_ctx;
	in.mtu = d->mtu;
	in.ctx_id = c->id;
	in.rx_slots = c->geom.rx_slots;
	in.rx_slot_bytes = c->geom.rx_slot_bytes;
	in.tx_entries = c->geom.tx_entries;
	in.link_ports = PN_CSR_LINK_PORTS;
	in.irq_vectors = d->nvec;
	in.window_max = pn_window_alloc_max();   /* what the heap (MEM_ALLOC) can get */
	in.csr_map_id = PN_CSR_MAP_ID;
	in.rx_bytes = c->geom.rx_bytes;
	in.tx_bytes = c->geom.tx_bytes;
	return copy_to_user(arg, &in, sizeof(in)) ? -EFAULT : 0;
}

static int pn_set_node(struct pn_dev *d, void __user *arg)
{
	struct paranic_node n;
	int r;

	if (copy_from_user(&n, arg, sizeof(n)))
		return -EFAULT;
	r = pn_node_check(&n);
	if (r)
		return r;
	mutex_lock(&d->lock);
	PN_CSR_W(d, NODE, n.node_id);
	d->node_id = n.node_id;
	d->num_nodes = n.num_nodes;
	d->topo_x = n.topo_x;
	d->topo_y = n.topo_y;
	mutex_unlock(&d->lock);
	return 0;
}

static int pn_load_routes(struct pn_dev *d, void __user *arg)
{
	struct paranic_routes rt;
	u8 *ports;
	u32 i;
	int r;

	if (copy_from_user(&rt, arg, sizeof(rt)))
		return -EFAULT;
	r = pn_routes_check(&rt, d->table_nodes);
	if (r)
		return r;
	ports = memdup_user(u64_to_user_ptr(rt.ports), rt.count);
	if (IS_ERR(ports))
		return PTR_ERR(ports);
	for (i = 0; i < rt.count; i++) {
		r = pn_route_port_check(ports[i], PN_CSR_LINK_PORTS);
		if (r)
			goto out;
	}
	mutex_lock(&d->lock);
	for (i = 0; i < rt.count; i++) {
		PN_CSR_W(d, ROUTER_ROUTE_ADR, rt.first + i);
		PN_CSR_W(d, ROUTER_ROUTE_PORT, ports[i]);
		PN_CSR_W(d, ROUTER_ROUTE_WRITE, 1);
	}
	mutex_unlock(&d->lock);
out:
	kfree(ports);
	return r;
}

static int pn_barrier_config(struct pn_dev *d, void __user *arg)
{
	struct paranic_barrier b;
	int r;

	if (copy_from_user(&b, arg, sizeof(b)))
		return -EFAULT;
	r = pn_barrier_check(&b, d->n_ctx);
	if (r)
		return r;
	mutex_lock(&d->lock);
	PN_CSR_W(d, BARRIER_ENABLE, 0);
	PN_CSR_W(d, BARRIER_NODES, b.nodes);
	PN_CSR_W(d, BARRIER_RADIX_LOG2, b.radix_log2);
	PN_CSR_W(d, BARRIER_MODE, b.mode);
	PN_CSR_W(d, BARRIER_PARTICIPANTS, b.participants);
	PN_CSR_W(d, BARRIER_ENABLE, 1);
	mutex_unlock(&d->lock);
	return 0;
}

static int pn_doorbell(struct pn_ctx *c, void __user *arg)
{
	struct paranic_doorbell db;
	int r;

	if (copy_from_user(&db, arg, sizeof(db)))
		return -EFAULT;
	r = pn_doorbell_check(&db);
	if (r)
		return r;
	if (db.reg == PN_REG_IRQ_ARM)
		c->irq_seen = atomic_read(&c->irq_count);   /* poll() wakes on the next MSI */
	writel(db.value, pn_ctx_page(c) + db.reg);
	return 0;
}

static int pn_mem_ioctl(struct pn_ctx *c, unsigned int cmd, void __user *arg)
{
	struct paranic_mem m;
	int r;

	if (copy_from_user(&m, arg, sizeof(m)))
		return -EFAULT;
	if (cmd == PARANIC_IOC_MEM_DEREGISTER)
		return pn_win_deregister(c, &m);
	r = pn_win_register(c, &m);
	if (r)
		return r;
	if (copy_to_user(arg, &m, sizeof(m))) {
		pn_win_deregister(c, &m);
		return -EFAULT;
	}
	return 0;
}

static long pn_ioctl(struct file *f, unsigned int cmd, unsigned long uarg)
{
	struct pn_ctx *c = f->private_data;
	struct pn_dev *d = c->dev;
	void __user *arg = (void __user *)uarg;
	struct paranic_send s;
	long r;

	r = pn_ioctl_check(cmd);
	if (r)
		return r;
	switch (cmd) {
	case PARANIC_IOC_SET_NODE_ID:
	case PARANIC_IOC_LOAD_ROUTES:
	case PARANIC_IOC_BARRIER_CONFIG:
		if (!capable(CAP_NET_ADMIN))
			return -EPERM;
		break;
	case PARANIC_IOC_SEND:
		if (copy_from_user(&s, arg, sizeof(s)))
			return -EFAULT;
		return pn_send(c, &s, u64_to_user_ptr(s.payload), f->f_flags & O_NONBLOCK);
	default:
		break;
	}
	down_read(&d->alive);
	if (d->dead) {
		up_read(&d->alive);
		return -ENODEV;
	}
	switch (cmd) {
	case PARANIC_IOC_GET_INFO:
		r = pn_get_info(c, arg);
		break;
	case PARANIC_IOC_SET_NODE_ID:
		r = pn_set_node(d, arg);
		break;
	case PARANIC_IOC_LOAD_ROUTES:
		r = pn_load_routes(d, arg);
		break;
	case PARANIC_IOC_BARRIER_CONFIG:
		r = pn_barrier_config(d, arg);
		break;
	case PARANIC_IOC_MEM_REGISTER:
	case PARANIC_IOC_MEM_DEREGISTER:
		r = pn_mem_ioctl(c, cmd, arg);
		break;
	case PARANIC_IOC_DOORBELL:
		r = pn_doorbell(c, arg);
		break;
	default:
		r = -ENOTTY;
	}
	up_read(&d->alive);
	return r;
}

/* ---- poll: an MSI since the last DOORBELL(IRQ_ARM) ------------------------------------------ */

static __poll_t pn_poll(struct file *f, struct poll_table_struct *pt)
{
	struct pn_ctx *c = f->private_data;
	__poll_t m = 0;

	poll_wait(f, &c->wq, pt);
	if (atomic_read(&c->irq_count) != c->irq_seen)
		m |= EPOLLIN | EPOLLRDNORM;
	if (READ_ONCE(c->dev->dead))
		m |= EPOLLERR | EPOLLHUP;
	return m;
}

const struct file_operations pn_fops = {
	.owner = THIS_MODULE,
	.open = pn_open,
	.release = pn_release,
	.mmap = pn_mmap,
	.unlocked_ioctl = pn_ioctl,
	.compat_ioctl = compat_ptr_ioctl,
	.write = pn_write,
	.poll = pn_poll,
	.llseek = no_llseek,
};
