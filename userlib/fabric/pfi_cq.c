/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Completion queues. Entries (successes and errors) wait in one ring in the order they
 * were made; a read returns the successes up to the first error entry and then
 * -FI_EAVAIL until fi_cq_readerr takes it. Progress is manual: every read (and sread)
 * first runs the progress of the endpoints bound to the CQ. Formats: CONTEXT, MSG,
 * DATA, TAGGED (UNSPEC is TAGGED).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pfi.h"

static size_t entry_size(enum fi_cq_format f)
{
	switch (f) {
	case FI_CQ_FORMAT_CONTEXT:
		return sizeof(struct fi_cq_entry);
	case FI_CQ_FORMAT_MSG:
		return sizeof(struct fi_cq_msg_entry);
	case FI_CQ_FORMAT_DATA:
		return sizeof(struct fi_cq_data_entry);
	default:
		return sizeof(struct fi_cq_tagged_entry);
	}
}

int pfi_cq_push(struct pfi_cq *cq, const struct pfi_cqe *c)
{
	if (cq->n == cq->cap) {
		size_t cap = cq->cap ? 2 * cq->cap : 256;
		struct pfi_cqe *q = malloc(cap * sizeof(*q));
		if (!q)
			return -FI_ENOMEM;
		for (size_t i = 0; i < cq->n; i++)
			q[i] = cq->q[(cq->head + i) % cq->cap];
		free(cq->q);
		cq->q = q;
		cq->cap = cap;
		cq->head = 0;
	}
	cq->q[(cq->head + cq->n) % cq->cap] = *c;
	cq->n++;
	return 0;
}

static void progress_all(struct pfi_cq *cq)
{
	for (int i = 0; i < cq->neps; i++)
		pfi_ep_progress(cq->eps[i]);
}

static ssize_t cq_readfrom(struct fid_cq *fcq, void *buf, size_t count, fi_addr_t *src_addr)
{
	struct pfi_cq *cq = container_of(fcq, struct pfi_cq, cq);
	size_t esz = entry_size(cq->format), k = 0;
	if (!buf && count)
		return -FI_EINVAL;
	progress_all(cq);
	while (k < count && cq->n) {
		const struct pfi_cqe *c = &cq->q[cq->head];
		if (c->err)
			break;
		memcpy((char *)buf + k * esz, &c->e, esz);   /* the formats are prefixes of the tagged one */
		if (src_addr)
			src_addr[k] = c->src;
		cq->head = (cq->head + 1) % cq->cap;
		cq->n--;
		k++;
	}
	if (k)
		return (ssize_t)k;
	return cq->n ? -FI_EAVAIL : -FI_EAGAIN;
}

static ssize_t cq_read(struct fid_cq *fcq, void *buf, size_t count)
{
	return cq_readfrom(fcq, buf, count, NULL);
}

static ssize_t cq_readerr(struct fid_cq *fcq, struct fi_cq_err_entry *buf, uint64_t flags)
{
	struct pfi_cq *cq = container_of(fcq, struct pfi_cq, cq);
	struct pfi_domain *dom = cq->dom;
	if (!buf || flags)
		return -FI_EINVAL;
	if (!cq->n || !cq->q[cq->head].err)
		return -FI_EAGAIN;
	const struct pfi_cqe *c = &cq->q[cq->head];
	/* Applications of API < 1.5 pass the shorter entry (no err_data_size). */
	int v15 = FI_VERSION_GE(dom->api_version, FI_VERSION(1, 5));
	buf->op_context = c->e.op_context;
	buf->flags = c->e.flags;
	buf->len = c->e.len;
	buf->buf = c->e.buf;
	buf->data = c->e.data;
	buf->tag = c->e.tag;
	buf->olen = c->olen;
	buf->err = c->err;
	buf->prov_errno = -c->err;
	buf->err_data = NULL;
	if (v15)
		buf->err_data_size = 0;
	cq->head = (cq->head + 1) % cq->cap;
	cq->n--;
	return 1;
}

static ssize_t cq_sreadfrom(struct fid_cq *fcq, void *buf, size_t count, fi_addr_t *src_addr, const void *cond,
			    int timeout)
{
	struct timespec t0, t;
	(void)cond;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		ssize_t r = cq_readfrom(fcq, buf, count, src_addr);
		if (r != -FI_EAGAIN)
			return r;
		if (timeout >= 0) {
			clock_gettime(CLOCK_MONOTONIC, &t);
			if ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 >= timeout)
				return -FI_EAGAIN;
		}
	}
}

static ssize_t cq_sread(struct fid_cq *fcq, void *buf, size_t count, const void *cond, int timeout)
{
	return cq_sreadfrom(fcq, buf, count, NULL, cond, timeout);
}

static int cq_signal(struct fid_cq *fcq)
{
	(void)fcq;
	return -FI_ENOSYS;
}

static const char *cq_strerror(struct fid_cq *fcq, int prov_errno, const void *err_data, char *buf, size_t len)
{
	(void)fcq, (void)err_data;
	const char *s = fi_strerror(prov_errno < 0 ? -prov_errno : prov_errno);
	if (buf && len) {
		strncpy(buf, s, len - 1);
		buf[len - 1] = 0;
		return buf;
	}
	return s;
}

static struct fi_ops_cq cq_ops = {
	.size = sizeof(struct fi_ops_cq),
	.read = cq_read,
	.readfrom = cq_readfrom,
	.readerr = cq_readerr,
	.sread = cq_sread,
	.sreadfrom = cq_sreadfrom,
	.signal = cq_signal,
	.strerror = cq_strerror,
};

static int cq_close(struct fid *fid)
{
	struct pfi_cq *cq = container_of(fid, struct pfi_cq, cq.fid);
	if (cq->refs)
		return -FI_EBUSY;
	cq->dom->refs--;
	free(cq->q);
	free(cq);
	return 0;
}

static struct fi_ops cq_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = cq_close,
	.bind = pfi_no_bind,
	.control = pfi_no_control,   /* no wait object (FI_GETWAIT) */
	.ops_open = pfi_no_ops_open,
};

int pfi_cq_open(struct fid_domain *domain, struct fi_cq_attr *attr, struct fid_cq **out, void *context)
{
	struct pfi_domain *dom = container_of(domain, struct pfi_domain, d);
	struct pfi_cq *cq;
	if (!attr || !out)
		return -FI_EINVAL;
	switch (attr->format) {
	case FI_CQ_FORMAT_UNSPEC:
	case FI_CQ_FORMAT_CONTEXT:
	case FI_CQ_FORMAT_MSG:
	case FI_CQ_FORMAT_DATA:
	case FI_CQ_FORMAT_TAGGED:
		break;
	default:
		return -FI_EINVAL;
	}
	/* sread polls: no wait object to hand out */
	if (attr->wait_obj != FI_WAIT_NONE && attr->wait_obj != FI_WAIT_UNSPEC)
		return -FI_ENOSYS;
	if (attr->wait_cond != FI_CQ_COND_NONE || (attr->flags & FI_AFFINITY))
		return -FI_ENOSYS;
	if (!(cq = calloc(1, sizeof(*cq))))
		return -FI_ENOMEM;
	cq->cq.fid.fclass = FI_CLASS_CQ;
	cq->cq.fid.context = context;
	cq->cq.fid.ops = &cq_fi_ops;
	cq->cq.ops = &cq_ops;
	cq->dom = dom;
	cq->format = attr->format == FI_CQ_FORMAT_UNSPEC ? FI_CQ_FORMAT_TAGGED : attr->format;
	dom->refs++;
	*out = &cq->cq;
	return 0;
}
