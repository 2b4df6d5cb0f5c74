/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The fabric and domain objects, and memory registration. The provider needs no
 * registration for messages (the ports layer copies, or registers bounce memory itself):
 * fi_mr_reg gives a region object with a key and no descriptor, so applications that
 * register anyway work. Closing the domain writes the counters (PARANIC_FI_STATS).
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "pfi.h"

/* ---- the fi_ops entries no object has (pfi.h) ------------------------------------------------ */

int pfi_no_bind(struct fid *fid, struct fid *bfid, uint64_t flags)
{
	(void)fid, (void)bfid, (void)flags;
	return -FI_ENOSYS;
}

int pfi_no_control(struct fid *fid, int command, void *arg)
{
	(void)fid, (void)command, (void)arg;
	return -FI_ENOSYS;
}

int pfi_no_ops_open(struct fid *fid, const char *name, uint64_t flags, void **ops, void *context)
{
	(void)fid, (void)name, (void)flags, (void)ops, (void)context;
	return -FI_ENOSYS;
}

/* ---- memory regions ------------------------------------------------------------------------- */

struct pfi_mr {
	struct fid_mr mr;
	struct pfi_domain *dom;
};

static int mr_close(struct fid *fid)
{
	struct pfi_mr *m = container_of(fid, struct pfi_mr, mr.fid);
	m->dom->refs--;
	free(m);
	return 0;
}

static struct fi_ops mr_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = mr_close,
	.bind = pfi_no_bind,
	.control = pfi_no_control,
	.ops_open = pfi_no_ops_open,
};

static int mr_reg(struct fid *fid, const void *buf, size_t len, uint64_t access, uint64_t offset,
		  uint64_t requested_key, uint64_t flags, struct fid_mr **mr, void *context)
{
	struct pfi_domain *dom = container_of(fid, struct pfi_domain, d.fid);
	struct pfi_mr *m;
	(void)access, (void)offset, (void)requested_key;
	if (!mr || (!buf && len) || flags)
		return -FI_EINVAL;
	if (!(m = calloc(1, sizeof(*m))))
		return -FI_ENOMEM;
	m->mr.fid.fclass = FI_CLASS_MR;
	m->mr.fid.context = context;
	m->mr.fid.ops = &mr_fi_ops;
	m->mr.mem_desc = NULL;
	m->mr.key = dom->mr_next_key++;
	m->dom = dom;
	dom->refs++;
	*mr = &m->mr;
	return 0;
}

static int mr_regv(struct fid *fid, const struct iovec *iov, size_t count, uint64_t access, uint64_t offset,
		   uint64_t requested_key, uint64_t flags, struct fid_mr **mr, void *context)
{
	if (count > 1 || (count && !iov))
		return -FI_EINVAL;
	return mr_reg(fid, count ? iov->iov_base : NULL, count ? iov->iov_len : 0, access, offset, requested_key,
		      flags, mr, context);
}

static int mr_regattr(struct fid *fid, const struct fi_mr_attr *attr, uint64_t flags, struct fid_mr **mr)
{
	if (!attr)
		return -FI_EINVAL;
	return mr_regv(fid, attr->mr_iov, attr->iov_count, attr->access, attr->offset, attr->requested_key, flags,
		       mr, attr->context);
}

static struct fi_ops_mr dom_mr_ops = {
	.size = sizeof(struct fi_ops_mr),
	.reg = mr_reg,
	.regv = mr_regv,
	.regattr = mr_regattr,
};

/* ---- domain --------------------------------------------------------------------------------- */

static int dom_close(struct fid *fid)
{
	struct pfi_domain *dom = container_of(fid, struct pfi_domain, d.fid);
	if (dom->refs)
		return -FI_EBUSY;
	pfi_stats_report(dom);
	dom->fab->refs--;
	free(dom);
	return 0;
}

static struct fi_ops dom_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = dom_close,
	.bind = pfi_no_bind,
	.control = pfi_no_control,
	.ops_open = pfi_no_ops_open,
};

static int no_scalable_ep(struct fid_domain *d, struct fi_info *info, struct fid_ep **sep, void *context)
{
	(void)d, (void)info, (void)sep, (void)context;
	return -FI_ENOSYS;
}

static int no_cntr_open(struct fid_domain *d, struct fi_cntr_attr *attr, struct fid_cntr **cntr, void *context)
{
	(void)d, (void)attr, (void)cntr, (void)context;
	return -FI_ENOSYS;
}

static int no_poll_open(struct fid_domain *d, struct fi_poll_attr *attr, struct fid_poll **pollset)
{
	(void)d, (void)attr, (void)pollset;
	return -FI_ENOSYS;
}

static int no_stx_ctx(struct fid_domain *d, struct fi_tx_attr *attr, struct fid_stx **stx, void *context)
{
	(void)d, (void)attr, (void)stx, (void)context;
	return -FI_ENOSYS;
}

static int no_srx_ctx(struct fid_domain *d, struct fi_rx_attr *attr, struct fid_ep **rx_ep, void *context)
{
	(void)d, (void)attr, (void)rx_ep, (void)context;
	return -FI_ENOSYS;
}

static int no_query_atomic(struct fid_domain *d, enum fi_datatype dt, enum fi_op op, struct fi_atomic_attr *attr,
			   uint64_t flags)
{
	(void)d, (void)dt, (void)op, (void)attr, (void)flags;
	return -FI_ENOSYS;
}

static int no_query_collective(struct fid_domain *d, enum fi_collective_op coll, struct fi_collective_attr *attr,
			       uint64_t flags)
{
	(void)d, (void)coll, (void)attr, (void)flags;
	return -FI_ENOSYS;
}

static int ep_open2(struct fid_domain *d, struct fi_info *info, struct fid_ep **ep, uint64_t flags, void *context)
{
	if (flags)
		return -FI_EINVAL;
	return pfi_ep_open(d, info, ep, context);
}

static struct fi_ops_domain dom_ops = {
	.size = sizeof(struct fi_ops_domain),
	.av_open = pfi_av_open,
	.cq_open = pfi_cq_open,
	.endpoint = pfi_ep_open,
	.scalable_ep = no_scalable_ep,
	.cntr_open = no_cntr_open,
	.poll_open = no_poll_open,
	.stx_ctx = no_stx_ctx,
	.srx_ctx = no_srx_ctx,
	.query_atomic = no_query_atomic,
	.query_collective = no_query_collective,
	.endpoint2 = ep_open2,
};

static int domain_open(struct fid_fabric *fabric, struct fi_info *info, struct fid_domain **out, void *context)
{
	struct pfi_fabric *fab = container_of(fabric, struct pfi_fabric, f);
	struct pfi_domain *dom;
	if (!info || !out)
		return -FI_EINVAL;
	if (info->domain_attr && info->domain_attr->name && strcmp(info->domain_attr->name, PFI_NAME))
		return -FI_EINVAL;
	if (info->domain_attr && info->domain_attr->threading == FI_THREAD_SAFE)
		return -FI_EINVAL;
	if (!(dom = calloc(1, sizeof(*dom))))
		return -FI_ENOMEM;
	dom->d.fid.fclass = FI_CLASS_DOMAIN;
	dom->d.fid.context = context;
	dom->d.fid.ops = &dom_fi_ops;
	dom->d.ops = &dom_ops;
	dom->d.mr = &dom_mr_ops;
	dom->fab = fab;
	dom->av_type = info->domain_attr ? info->domain_attr->av_type : FI_AV_UNSPEC;
	dom->api_version = fab->f.api_version;
	dom->mr_next_key = 1;
	dom->node = -1;
	fab->refs++;
	*out = &dom->d;
	return 0;
}

static int domain_open2(struct fid_fabric *fabric, struct fi_info *info, struct fid_domain **dom, uint64_t flags,
			void *context)
{
	if (flags)
		return -FI_EINVAL;
	return domain_open(fabric, info, dom, context);
}

/* ---- fabric --------------------------------------------------------------------------------- */

static int fab_close(struct fid *fid)
{
	struct pfi_fabric *fab = container_of(fid, struct pfi_fabric, f.fid);
	if (fab->refs)
		return -FI_EBUSY;
	free(fab);
	return 0;
}

static struct fi_ops fab_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = fab_close,
	.bind = pfi_no_bind,
	.control = pfi_no_control,
	.ops_open = pfi_no_ops_open,
};

static int no_pep(struct fid_fabric *f, struct fi_info *info, struct fid_pep **pep, void *context)
{
	(void)f, (void)info, (void)pep, (void)context;
	return -FI_ENOSYS;
}

static int no_eq(struct fid_fabric *f, struct fi_eq_attr *attr, struct fid_eq **eq, void *context)
{
	(void)f, (void)attr, (void)eq, (void)context;
	return -FI_ENOSYS;
}

static int no_wait(struct fid_fabric *f, struct fi_wait_attr *attr, struct fid_wait **w)
{
	(void)f, (void)attr, (void)w;
	return -FI_ENOSYS;
}

static int no_trywait(struct fid_fabric *f, struct fid **fids, int count)
{
	(void)f, (void)fids, (void)count;
	return -FI_ENOSYS;
}

static struct fi_ops_fabric fab_ops = {
	.size = sizeof(struct fi_ops_fabric),
	.domain = domain_open,
	.passive_ep = no_pep,
	.eq_open = no_eq,
	.wait_open = no_wait,
	.trywait = no_trywait,
	.domain2 = domain_open2,
};

int pfi_fabric_open(struct fi_fabric_attr *attr, struct fid_fabric **out, void *context)
{
	struct pfi_fabric *fab;
	if (!out)
		return -FI_EINVAL;
	if (attr && attr->name && strcmp(attr->name, PFI_NAME))
		return -FI_EINVAL;
	if (!(fab = calloc(1, sizeof(*fab))))
		return -FI_ENOMEM;
	fab->f.fid.fclass = FI_CLASS_FABRIC;
	fab->f.fid.context = context;
	fab->f.fid.ops = &fab_fi_ops;
	fab->f.ops = &fab_ops;
	/* api_version is set by libfabric's fi_fabric() after this returns */
	*out = &fab->f;
	return 0;
}
