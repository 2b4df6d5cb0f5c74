/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The provider's entry point (FI_EXT_INI: libfabric loads libparanic-fi.so from
 * FI_PROVIDER_PATH) and fi_getinfo: the one fi_info the provider offers, filtered by the
 * application's hints (a hint the provider cannot meet gives -FI_ENODATA).
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "pfi.h"

/* What an endpoint can do. FI_SOURCE: the CQ reports the sender (fi_cq_readfrom). */
#define PFI_PRIMARY_CAPS (FI_TAGGED | FI_MSG | FI_SEND | FI_RECV | FI_DIRECTED_RECV)
#define PFI_SECONDARY_CAPS (FI_SOURCE | FI_LOCAL_COMM | FI_REMOTE_COMM | FI_REMOTE_CQ_DATA)
#define PFI_CAPS (PFI_PRIMARY_CAPS | PFI_SECONDARY_CAPS)
#define PFI_TX_OP_FLAGS (FI_COMPLETION | FI_INJECT_COMPLETE | FI_INJECT | FI_REMOTE_CQ_DATA)
#define PFI_RX_OP_FLAGS (FI_COMPLETION)
#define PFI_MSG_ORDER (FI_ORDER_SAS)

uint32_t pfi_cluster_hash(void)
{
	const char *c = getenv("PARANIC_CLUSTER");
	uint32_t h = 2166136261u;   /* FNV-1a */
	if (!c || !*c)
		c = "default";
	for (; *c; c++)
		h = (h ^ (uint8_t)*c) * 16777619u;
	return h;
}

/* -FI_ENODATA unless the hints ask only for what the provider gives. */
static int hints_ok(uint32_t version, const struct fi_info *h)
{
	if (!h)
		return 0;
	if (h->caps & ~PFI_CAPS)
		return -FI_ENODATA;
	if (h->addr_format != FI_FORMAT_UNSPEC)
		return -FI_ENODATA;
	if (h->ep_attr) {
		const struct fi_ep_attr *e = h->ep_attr;
		if (e->type != FI_EP_UNSPEC && e->type != FI_EP_RDM)
			return -FI_ENODATA;
		if (e->max_msg_size > PN_PORT_MAX_MSG || e->tx_ctx_cnt > 1 || e->rx_ctx_cnt > 1 ||
		    e->msg_prefix_size || e->protocol != FI_PROTO_UNSPEC)
			return -FI_ENODATA;
		if (e->auth_key_size)
			return -FI_ENODATA;
	}
	if (h->domain_attr) {
		const struct fi_domain_attr *d = h->domain_attr;
		if (d->name && strcmp(d->name, PFI_NAME))
			return -FI_ENODATA;
		if (d->threading == FI_THREAD_SAFE)
			return -FI_ENODATA;
		if (d->control_progress == FI_PROGRESS_AUTO || d->data_progress == FI_PROGRESS_AUTO)
			return -FI_ENODATA;
		if (d->av_type != FI_AV_UNSPEC && d->av_type != FI_AV_MAP && d->av_type != FI_AV_TABLE)
			return -FI_ENODATA;
		if (d->cq_data_size > PFI_CQ_DATA_SIZE)
			return -FI_ENODATA;
		if (d->caps & ~(FI_LOCAL_COMM | FI_REMOTE_COMM))
			return -FI_ENODATA;
		if (d->auth_key_size)
			return -FI_ENODATA;
	}
	if (h->fabric_attr && h->fabric_attr->name && strcmp(h->fabric_attr->name, PFI_NAME))
		return -FI_ENODATA;
	if (h->tx_attr) {
		const struct fi_tx_attr *t = h->tx_attr;
		if ((t->caps & ~PFI_CAPS) || (t->msg_order & ~PFI_MSG_ORDER) || t->inject_size > PFI_INJECT_SIZE ||
		    t->iov_limit > 1 || t->rma_iov_limit > 0 || (t->op_flags & ~PFI_TX_OP_FLAGS))
			return -FI_ENODATA;
	}
	if (h->rx_attr) {
		const struct fi_rx_attr *r = h->rx_attr;
		if ((r->caps & ~PFI_CAPS) || (r->msg_order & ~PFI_MSG_ORDER) || r->iov_limit > 1 ||
		    (r->op_flags & ~PFI_RX_OP_FLAGS))
			return -FI_ENODATA;
	}
	(void)version;
	return 0;
}

/* The fi_info offered, shaped by the hints where they choose (AV type, op flags, caps). */
static struct fi_info *offer(uint32_t version, const struct fi_info *h)
{
	struct fi_info *fi = fi_allocinfo();
	if (!fi)
		return NULL;
	uint64_t caps = PFI_CAPS;
	if (h && h->caps)   /* what was asked (and its secondary caps) */
		caps = (h->caps & PFI_PRIMARY_CAPS ? h->caps & PFI_PRIMARY_CAPS : PFI_PRIMARY_CAPS) |
		       (h->caps & PFI_SECONDARY_CAPS);
	if (caps & (FI_TAGGED | FI_MSG) && !(caps & (FI_SEND | FI_RECV)))
		caps |= FI_SEND | FI_RECV;
	fi->caps = caps;
	fi->mode = 0;   /* nothing asked of the application (FI_CONTEXT/FI_CONTEXT2 accepted) */
	fi->addr_format = FI_FORMAT_UNSPEC;
	fi->src_addr = NULL;
	fi->dest_addr = NULL;

	fi->tx_attr->caps = caps;
	fi->tx_attr->mode = 0;
	fi->tx_attr->op_flags = h && h->tx_attr ? h->tx_attr->op_flags : 0;
	fi->tx_attr->msg_order = PFI_MSG_ORDER;
	fi->tx_attr->comp_order = FI_ORDER_NONE;
	fi->tx_attr->inject_size = PFI_INJECT_SIZE;
	fi->tx_attr->size = PFI_QUEUE_SIZE;
	fi->tx_attr->iov_limit = 1;
	fi->tx_attr->rma_iov_limit = 0;

	fi->rx_attr->caps = caps;
	fi->rx_attr->mode = 0;
	fi->rx_attr->op_flags = h && h->rx_attr ? h->rx_attr->op_flags : 0;
	fi->rx_attr->msg_order = PFI_MSG_ORDER;
	fi->rx_attr->comp_order = FI_ORDER_NONE;
	fi->rx_attr->total_buffered_recv = 0;
	fi->rx_attr->size = PFI_QUEUE_SIZE;
	fi->rx_attr->iov_limit = 1;

	fi->ep_attr->type = FI_EP_RDM;
	fi->ep_attr->protocol = FI_PROTO_UNSPEC;
	fi->ep_attr->protocol_version = 1;
	fi->ep_attr->max_msg_size = PN_PORT_MAX_MSG;
	fi->ep_attr->msg_prefix_size = 0;
	/* All 64 bits are the application's, none reserved (libfabric's generic format, which
	 * Open MPI reads to count the bits it may use). */
	fi->ep_attr->mem_tag_format = 0xAAAAAAAAAAAAAAAAull;
	fi->ep_attr->tx_ctx_cnt = 1;
	fi->ep_attr->rx_ctx_cnt = 1;

	fi->domain_attr->name = strdup(PFI_NAME);
	fi->domain_attr->threading = FI_THREAD_DOMAIN;
	fi->domain_attr->control_progress = FI_PROGRESS_MANUAL;
	fi->domain_attr->data_progress = FI_PROGRESS_MANUAL;
	fi->domain_attr->resource_mgmt = FI_RM_ENABLED;
	fi->domain_attr->av_type = h && h->domain_attr && h->domain_attr->av_type != FI_AV_UNSPEC
					   ? h->domain_attr->av_type
					   : FI_AV_MAP;
	fi->domain_attr->mr_mode = FI_VERSION_LT(version, FI_VERSION(1, 5)) ? FI_MR_SCALABLE : 0;
	fi->domain_attr->mr_key_size = sizeof(uint64_t);
	fi->domain_attr->cq_data_size = PFI_CQ_DATA_SIZE;
	fi->domain_attr->cq_cnt = 64;
	fi->domain_attr->ep_cnt = 64;
	fi->domain_attr->tx_ctx_cnt = 64;
	fi->domain_attr->rx_ctx_cnt = 64;
	fi->domain_attr->max_ep_tx_ctx = 1;
	fi->domain_attr->max_ep_rx_ctx = 1;
	fi->domain_attr->max_ep_stx_ctx = 0;
	fi->domain_attr->max_ep_srx_ctx = 0;
	fi->domain_attr->mr_iov_limit = 1;
	fi->domain_attr->mr_cnt = 1u << 16;
	fi->domain_attr->caps = FI_LOCAL_COMM | FI_REMOTE_COMM;

	fi->fabric_attr->name = strdup(PFI_NAME);
	fi->fabric_attr->prov_version = PFI_PROV_VERSION;
	if (!fi->domain_attr->name || !fi->fabric_attr->name) {
		fi_freeinfo(fi);
		return NULL;
	}
	return fi;
}

static int pfi_getinfo(uint32_t version, const char *node, const char *service, uint64_t flags,
		       const struct fi_info *hints, struct fi_info **info)
{
	int rc;
	(void)flags;
	*info = NULL;
	if (node || service)   /* the provider resolves no names: addresses come from fi_getname */
		return -FI_ENODATA;
	if ((rc = hints_ok(version, hints)) < 0)
		return rc;
	if (!(*info = offer(version, hints)))
		return -FI_ENOMEM;
	return 0;
}

static void pfi_cleanup(void)
{
}

struct fi_provider pfi_prov = {
	.version = PFI_PROV_VERSION,
	.fi_version = FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION),
	.name = PFI_NAME,
	.getinfo = pfi_getinfo,
	.fabric = pfi_fabric_open,
	.cleanup = pfi_cleanup,
};

#ifndef EXTERNALLY_VISIBLE   /* used by FI_EXT_INI, defined by libfabric's own build only */
#define EXTERNALLY_VISIBLE
#endif
FI_EXT_INI
{
	return &pfi_prov;
}
