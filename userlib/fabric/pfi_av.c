/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Address vectors. An address (struct pfi_addr, 16 bytes) names a port: the cluster
 * (a hash of its name, so that an address of another job's cluster is refused), the node
 * and the context. FI_AV_MAP: the fi_addr_t is (node << 16) | ctx, nothing to look up;
 * FI_AV_TABLE: the index of the address in the table, in insertion order.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pfi.h"

/* A node and context the NIC can address (pn_protocol.h, from spec/protocol.py). */
static int port_ok(unsigned node, unsigned ctx)
{
	return node < PN_MAX_NODES && ctx < PN_MAX_CONTEXTS;
}

static int addr_ok(const struct pfi_av *av, const struct pfi_addr *a)
{
	return a->magic == PFI_ADDR_MAGIC && a->cluster == av->cluster && port_ok(a->node, a->ctx);
}

int pfi_av_resolve(const struct pfi_av *av, fi_addr_t a, unsigned *node, unsigned *ctx)
{
	if (a == FI_ADDR_UNSPEC || a == FI_ADDR_NOTAVAIL)
		return -FI_EINVAL;
	if (av->type == FI_AV_MAP) {
		fi_addr_t n = a >> PFI_MAP_CTX_BITS, c = a & ((1u << PFI_MAP_CTX_BITS) - 1);
		if (n >= PN_MAX_NODES || !port_ok((unsigned)n, (unsigned)c))
			return -FI_EINVAL;
		*node = (unsigned)n;
		*ctx = (unsigned)c;
		return 0;
	}
	if (a >= av->n || !av->tab[a].magic)
		return -FI_EINVAL;
	*node = av->tab[a].node;
	*ctx = av->tab[a].ctx;
	return 0;
}

fi_addr_t pfi_av_reverse(const struct pfi_av *av, unsigned node, unsigned ctx)
{
	if (av->type == FI_AV_MAP)
		return pfi_map_addr(node, ctx);
	for (size_t i = 0; i < av->n; i++)   /* (FI_SOURCE with a table: a linear search) */
		if (av->tab[i].magic && av->tab[i].node == node && av->tab[i].ctx == ctx)
			return i;
	return FI_ADDR_NOTAVAIL;
}

static int av_insert(struct fid_av *fav, const void *addr, size_t count, fi_addr_t *fi_addr, uint64_t flags,
		     void *context)
{
	struct pfi_av *av = container_of(fav, struct pfi_av, av);
	const struct pfi_addr *in = addr;
	int ok = 0;
	(void)context;
	if ((count && !addr) || (flags & ~(uint64_t)FI_MORE))
		return -FI_EINVAL;
	if (av->type == FI_AV_TABLE && av->n + count > av->cap) {
		size_t cap = av->cap ? av->cap : 64;
		while (cap < av->n + count)
			cap *= 2;
		struct pfi_addr *t = realloc(av->tab, cap * sizeof(*t));
		if (!t)
			return -FI_ENOMEM;
		av->tab = t;
		av->cap = cap;
	}
	for (size_t i = 0; i < count; i++) {
		struct pfi_addr a;
		fi_addr_t fa = FI_ADDR_NOTAVAIL;
		memcpy(&a, &in[i], sizeof(a));
		if (addr_ok(av, &a)) {
			if (av->type == FI_AV_MAP) {
				fa = pfi_map_addr(a.node, a.ctx);
			} else {
				fa = av->n;
				av->tab[av->n++] = a;
			}
			ok++;
		}
		if (fi_addr)
			fi_addr[i] = fa;
	}
	return ok;
}

static int av_insertsvc(struct fid_av *av, const char *node, const char *service, fi_addr_t *fi_addr,
			uint64_t flags, void *context)
{
	(void)av, (void)node, (void)service, (void)fi_addr, (void)flags, (void)context;
	return -FI_ENOSYS;
}

static int av_insertsym(struct fid_av *av, const char *node, size_t nodecnt, const char *service, size_t svccnt,
			fi_addr_t *fi_addr, uint64_t flags, void *context)
{
	(void)av, (void)node, (void)nodecnt, (void)service, (void)svccnt, (void)fi_addr, (void)flags, (void)context;
	return -FI_ENOSYS;
}

static int av_remove(struct fid_av *fav, fi_addr_t *fi_addr, size_t count, uint64_t flags)
{
	struct pfi_av *av = container_of(fav, struct pfi_av, av);
	if ((count && !fi_addr) || flags)
		return -FI_EINVAL;
	for (size_t i = 0; i < count; i++) {
		if (av->type == FI_AV_TABLE) {
			if (fi_addr[i] >= av->n)
				return -FI_EINVAL;
			av->tab[fi_addr[i]].magic = 0;
		}
	}
	return 0;
}

static int av_lookup(struct fid_av *fav, fi_addr_t fi_addr, void *addr, size_t *addrlen)
{
	struct pfi_av *av = container_of(fav, struct pfi_av, av);
	struct pfi_addr a = {PFI_ADDR_MAGIC, av->cluster, 0, 0, 0};
	unsigned node, ctx;
	if (!addrlen || (!addr && *addrlen))
		return -FI_EINVAL;
	if (pfi_av_resolve(av, fi_addr, &node, &ctx) < 0)
		return -FI_EINVAL;
	a.node = (uint16_t)node;
	a.ctx = (uint16_t)ctx;
	memcpy(addr, &a, *addrlen < sizeof(a) ? *addrlen : sizeof(a));
	*addrlen = sizeof(a);
	return 0;
}

static const char *av_straddr(struct fid_av *fav, const void *addr, char *buf, size_t *len)
{
	struct pfi_addr a;
	(void)fav;
	if (!addr || !buf || !len)
		return NULL;
	memcpy(&a, addr, sizeof(a));
	int n = snprintf(buf, *len, "paranic://%08x/%u:%u", a.cluster, a.node, a.ctx);
	if (n >= 0)
		*len = (size_t)n + 1;
	return buf;
}

static int av_set(struct fid_av *av, struct fi_av_set_attr *attr, struct fid_av_set **set, void *context)
{
	(void)av, (void)attr, (void)set, (void)context;
	return -FI_ENOSYS;
}

static struct fi_ops_av av_ops = {
	.size = sizeof(struct fi_ops_av),
	.insert = av_insert,
	.insertsvc = av_insertsvc,
	.insertsym = av_insertsym,
	.remove = av_remove,
	.lookup = av_lookup,
	.straddr = av_straddr,
	.av_set = av_set,
};

static int av_close(struct fid *fid)
{
	struct pfi_av *av = container_of(fid, struct pfi_av, av.fid);
	if (av->refs)
		return -FI_EBUSY;
	av->dom->refs--;
	free(av->tab);
	free(av);
	return 0;
}

static struct fi_ops av_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = av_close,
	.bind = pfi_no_bind,   /* no event queues: inserts are synchronous */
	.control = pfi_no_control,
	.ops_open = pfi_no_ops_open,
};

int pfi_av_open(struct fid_domain *domain, struct fi_av_attr *attr, struct fid_av **out, void *context)
{
	struct pfi_domain *dom = container_of(domain, struct pfi_domain, d);
	struct pfi_av *av;
	enum fi_av_type type;
	if (!attr || !out)
		return -FI_EINVAL;
	type = attr->type != FI_AV_UNSPEC ? attr->type : dom->av_type != FI_AV_UNSPEC ? dom->av_type : FI_AV_MAP;
	if (type != FI_AV_MAP && type != FI_AV_TABLE)
		return -FI_EINVAL;
	if (attr->flags & (FI_EVENT | FI_READ) || attr->name || attr->rx_ctx_bits)
		return -FI_ENOSYS;   /* no async inserts, no shared (named) AVs, no scalable endpoints */
	if (!(av = calloc(1, sizeof(*av))))
		return -FI_ENOMEM;
	av->av.fid.fclass = FI_CLASS_AV;
	av->av.fid.context = context;
	av->av.fid.ops = &av_fi_ops;
	av->av.ops = &av_ops;
	av->dom = dom;
	av->type = type;
	av->cluster = pfi_cluster_hash();
	dom->refs++;
	*out = &av->av;
	return 0;
}
