/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * libparanic-fi.so: a libfabric provider ("paranic") on the ports layer (pn_ports.h).
 * Private header: the provider's objects and the functions its files share.
 *
 * Design in brief (docs/fabric.md has the whole story):
 *   - one endpoint (FI_EP_RDM) = one port = one HAL context; its address is
 *     (cluster, node, context), struct pfi_addr;
 *   - tagged messages are ports messages on channel PFI_CH_TAGGED with the libfabric
 *     tag as the ports tag and ~ignore as the mask; FI_MSG messages go on PFI_CH_MSG;
 *     remote CQ data travels as the ports message's immediate data (pn_port_isendx);
 *   - every operation is a ports request, kept in the endpoint's list of operations;
 *     progress is manual: a CQ read runs pn_port_progress on every endpoint bound to
 *     the CQ and turns the requests that completed into CQ entries (in the order the
 *     operations were posted);
 *   - truncation is the ports layer's PN_PORT_TRUNC receive (the message is consumed,
 *     the receive ends with FI_ETRUNC); FI_PEEK is pn_port_probe; FI_CLAIM receives the
 *     probed message at once into a provider buffer (so nothing else can match it) and
 *     copies it out at the claiming receive.
 * Only libfabric's public headers (rdma/fabric.h and its siblings, fi_prov.h) are used: the fid
 * operation tables are written here.
 *
 * Files, one concern each:
 *   pfi_prov.c    the provider's entry point, fi_getinfo and the attributes offered
 *   pfi_fabric.c  fabric and domain objects, memory registration
 *   pfi_av.c      address vectors (FI_AV_MAP, FI_AV_TABLE), the address format
 *   pfi_cq.c      completion queues (entries, error entries, read, readfrom, sread)
 *   pfi_ep.c      endpoints: open, bind, enable, getname, cancel, close, progress
 *   pfi_tagged.c  fi_tsend/trecv/tinject..., FI_PEEK / FI_CLAIM / FI_DISCARD
 *   pfi_msg.c     fi_send/recv/inject...
 *   pfi_stats.c   the counters (PARANIC_FI_STATS)
 */
#ifndef PFI_H
#define PFI_H

#include <stddef.h>
#include <stdint.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>
#include <rdma/providers/fi_prov.h>

#include "paranic/pn_ports.h"

#define PFI_NAME "paranic"
#define PFI_PROV_VERSION FI_VERSION(1, 0)
#define PFI_CH_TAGGED 0                   /* ports channel of tagged messages */
#define PFI_CH_MSG 1                      /* ports channel of FI_MSG messages */
#define PFI_INJECT_SIZE 4096              /* fi_inject / fi_tinject: copied at the call */
#define PFI_QUEUE_SIZE 65536              /* tx/rx attr size: operations outstanding (a hint) */
#define PFI_CQ_DATA_SIZE 4                /* the ports message header carries 32 bits */
#define PFI_ADDR_MAGIC 0x49464e50u        /* "PNFI" */
#define PFI_MAX_EP_PER_CQ 16

/* The address of an endpoint (fi_getname, fi_av_insert): 16 bytes. */
struct pfi_addr {
	uint32_t magic;       /* PFI_ADDR_MAGIC */
	uint32_t cluster;     /* hash of the cluster (job) name: addresses of other clusters are refused */
	uint16_t node;
	uint16_t ctx;
	uint32_t rsvd;        /* 0 */
};

/* fi_addr_t of FI_AV_MAP: the address itself, (node << 16) | ctx. */
#define PFI_MAP_CTX_BITS 16
static inline fi_addr_t pfi_map_addr(unsigned node, unsigned ctx)
{
	return ((fi_addr_t)node << PFI_MAP_CTX_BITS) | ctx;
}

/* Counters of one process's provider use (pfi_stats.c). */
struct pfi_counters {
	uint64_t eps;                                   /* endpoints opened */
	uint64_t tsend, trecv, tinject, send, recv, inject;   /* operations posted */
	uint64_t peek, peek_found, claim, discard;
	uint64_t cancelled, truncated, errors;
	uint64_t cq_entries, cq_errors;
	/* of the ports (pn_port_stats), summed over the closed endpoints */
	uint64_t sent_msgs, sent_bytes, recv_msgs, recv_bytes;
	uint64_t shm_msgs, shm_bytes, shm_recv_msgs, shm_recv_bytes;
	uint64_t eager_msgs, rndv_msgs;
	/* of the NIC (pn_status) */
	uint64_t nic_tx_packets, nic_tx_bytes, nic_rx_packets, nic_rx_bytes;
};

struct pfi_fabric {
	struct fid_fabric f;
	int refs;             /* domains open */
};

struct pfi_domain {
	struct fid_domain d;
	struct pfi_fabric *fab;
	enum fi_av_type av_type;
	uint32_t api_version;
	int refs;             /* avs, cqs, eps, mrs open */
	uint64_t mr_next_key;
	struct pfi_counters cnt;
	int node;             /* of the last endpoint (for the summary), -1 */
};

struct pfi_av {
	struct fid_av av;
	struct pfi_domain *dom;
	enum fi_av_type type;
	uint32_t cluster;
	struct pfi_addr *tab; /* FI_AV_TABLE: index -> address (magic 0: removed) */
	size_t n, cap;
	int refs;             /* endpoints bound */
};

/* One completion, as the tagged format plus the source and the error. */
struct pfi_cqe {
	struct fi_cq_tagged_entry e;
	fi_addr_t src;
	int err;              /* 0, or the positive FI_E* of an error entry */
	size_t olen;
};

struct pfi_ep;
struct pfi_cq {
	struct fid_cq cq;
	struct pfi_domain *dom;
	enum fi_cq_format format;
	struct pfi_cqe *q;    /* ring of entries */
	size_t head, n, cap;
	struct pfi_ep *eps[PFI_MAX_EP_PER_CQ];   /* endpoints whose progress a read runs */
	int neps;
	int refs;
};

enum pfi_op_kind {
	OP_SEND = 1,   /* completes with a send entry (or silently) */
	OP_INJECT,     /* owns a copy of the data; never an entry */
	OP_RECV,       /* a receive into the caller's buffer */
	OP_CLAIM,      /* FI_PEEK|FI_CLAIM: the message received into `bounce`, not yet claimed */
	OP_CLAIMED,    /* FI_CLAIM: the claimed message, to be copied into the caller's buffer */
	OP_DISCARD,    /* FI_PEEK|FI_DISCARD: a 0-byte truncating receive; never an entry */
};

struct pfi_op {
	struct pfi_op *next, *prev;
	pn_port_req_t *req;   /* NULL once collected (OP_CLAIM keeps the status) */
	int kind;
	int comp;             /* write a completion on success */
	int discard;          /* OP_CLAIMED with FI_DISCARD */
	void *context;
	uint64_t flags;       /* FI_SEND/FI_RECV | FI_TAGGED/FI_MSG for the entry */
	void *buf;
	size_t len;           /* send: length; receive: capacity */
	void *bounce;         /* OP_INJECT's copy, OP_CLAIM's buffer */
	int done;             /* OP_CLAIM: its request has completed */
	int rc;
	pn_port_status_t st;
};

struct pfi_ep {
	struct fid_ep ep;
	struct pfi_domain *dom;
	pn_port_t *port;
	int node, ctx;
	uint64_t caps;
	uint64_t tx_op_flags, rx_op_flags;
	struct pfi_av *av;
	struct pfi_cq *tx_cq, *rx_cq;
	int tx_sel, rx_sel;   /* FI_SELECTIVE_COMPLETION on the binding */
	int enabled;
	struct pfi_op *ops_head, *ops_tail;   /* outstanding operations, in posting order */
	struct pfi_counters *cnt;
};

/* The one buffer of an iovec list (iov_limit is 1). */
static inline int pfi_iov1(const struct iovec *iov, size_t count, void **buf, size_t *len)
{
	if (count > 1 || (count && !iov))
		return -FI_EINVAL;
	*buf = count ? iov[0].iov_base : NULL;
	*len = count ? iov[0].iov_len : 0;
	return 0;
}

#pragma GCC visibility push(hidden)

extern struct fi_provider pfi_prov;

/* pfi_prov.c */
uint32_t pfi_cluster_hash(void);

/* pfi_fabric.c */
int pfi_fabric_open(struct fi_fabric_attr *attr, struct fid_fabric **fabric, void *context);
/* The fi_ops entries no object of the provider has (-FI_ENOSYS): bind (of a fabric,
 * domain, AV or CQ: no event queues, no wait sets), control (no wait objects), ops_open
 * (no extension interfaces). */
int pfi_no_bind(struct fid *fid, struct fid *bfid, uint64_t flags);
int pfi_no_control(struct fid *fid, int command, void *arg);
int pfi_no_ops_open(struct fid *fid, const char *name, uint64_t flags, void **ops, void *context);
/* pfi_noops.c: every operation -FI_ENOSYS, for the endpoint's RMA, atomic and collective tables */
extern struct fi_ops_rma pfi_no_rma_ops;
extern struct fi_ops_atomic pfi_no_atomic_ops;
extern struct fi_ops_collective pfi_no_coll_ops;

/* pfi_av.c */
int pfi_av_open(struct fid_domain *domain, struct fi_av_attr *attr, struct fid_av **av, void *context);
/* (node, ctx) of fi_addr; -FI_EINVAL when the AV does not hold it. */
int pfi_av_resolve(const struct pfi_av *av, fi_addr_t a, unsigned *node, unsigned *ctx);
/* The fi_addr_t of (node, ctx) in av (FI_ADDR_NOTAVAIL when not inserted). */
fi_addr_t pfi_av_reverse(const struct pfi_av *av, unsigned node, unsigned ctx);

/* pfi_cq.c */
int pfi_cq_open(struct fid_domain *domain, struct fi_cq_attr *attr, struct fid_cq **cq, void *context);
int pfi_cq_push(struct pfi_cq *cq, const struct pfi_cqe *c);

/* pfi_ep.c */
int pfi_ep_open(struct fid_domain *domain, struct fi_info *info, struct fid_ep **ep, void *context);
void pfi_ep_progress(struct pfi_ep *ep);
/* Argument checks and the source / destination of an operation. */
int pfi_ep_dest(struct pfi_ep *ep, fi_addr_t a, unsigned *node, unsigned *ctx);
int pfi_ep_src(struct pfi_ep *ep, fi_addr_t a, int *node, int *ctx);
struct pfi_op *pfi_op_new(struct pfi_ep *ep, int kind, void *context, uint64_t flags);
void pfi_op_drop(struct pfi_ep *ep, struct pfi_op *op);
/* Post a send on `channel`; flags: the operation's flags (FI_COMPLETION, FI_REMOTE_CQ_DATA);
 * inject: 0, PFI_INJECT_CALL (fi_inject: copied, never a completion) or PFI_INJECT_FLAG
 * (FI_INJECT: copied, completion as the flags say). */
#define PFI_INJECT_CALL 1
#define PFI_INJECT_FLAG 2
ssize_t pfi_post_send(struct pfi_ep *ep, int channel, const void *buf, size_t len, fi_addr_t dest,
		      uint64_t tag, uint64_t data, void *context, uint64_t flags, int inject);
ssize_t pfi_post_recv(struct pfi_ep *ep, int channel, void *buf, size_t len, fi_addr_t src, uint64_t tag,
		      uint64_t ignore, void *context, uint64_t flags);
/* The same for the calls with an iovec list (fi_sendv, fi_sendmsg ...): its one buffer. */
static inline ssize_t pfi_post_sendv(struct pfi_ep *ep, int channel, const struct iovec *iov, size_t count,
				     fi_addr_t dest, uint64_t tag, uint64_t data, void *context, uint64_t flags,
				     int inject)
{
	void *b;
	size_t n;
	if (pfi_iov1(iov, count, &b, &n) < 0)
		return -FI_EINVAL;
	return pfi_post_send(ep, channel, b, n, dest, tag, data, context, flags, inject);
}
static inline ssize_t pfi_post_recvv(struct pfi_ep *ep, int channel, const struct iovec *iov, size_t count,
				     fi_addr_t src, uint64_t tag, uint64_t ignore, void *context, uint64_t flags)
{
	void *b;
	size_t n;
	if (pfi_iov1(iov, count, &b, &n) < 0)
		return -FI_EINVAL;
	return pfi_post_recv(ep, channel, b, n, src, tag, ignore, context, flags);
}
void pfi_ep_track(struct pfi_ep *ep, struct pfi_op *op);
struct pfi_op *pfi_ep_find_claim(struct pfi_ep *ep, void *context);
/* Write an entry for op to the right CQ (success: only when op->comp). */
void pfi_op_complete(struct pfi_ep *ep, struct pfi_op *op, int err, size_t olen);
int pfi_errno(int neg_errno);

/* pfi_tagged.c, pfi_msg.c */
extern struct fi_ops_tagged pfi_tagged_ops;
extern struct fi_ops_msg pfi_msg_ops;

/* pfi_stats.c */
void pfi_stats_add_port(struct pfi_counters *c, pn_port_t *port);
void pfi_stats_report(const struct pfi_domain *dom);

#pragma GCC visibility pop

#endif /* PFI_H */
