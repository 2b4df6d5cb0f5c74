/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * FI_TAGGED: ports messages on channel PFI_CH_TAGGED, the libfabric tag as the ports tag
 * and ~ignore as its mask; FI_REMOTE_CQ_DATA as the message's immediate data.
 *
 * fi_trecvmsg flags:
 *   FI_PEEK            pn_port_probe: a completion with the message's size, tag, data and
 *                      source, or an error completion FI_ENOMSG; the message stays
 *   FI_PEEK|FI_CLAIM   the same, and the message is received at once into a buffer of the
 *                      provider (an exact receive: its source, tag and channel; the first
 *                      such message is the one probed, ports match in order), so no other
 *                      receive can take it; the claiming receive (FI_CLAIM, same context)
 *                      copies it out
 *   FI_PEEK|FI_DISCARD the same, the message dropped (a 0-byte truncating receive)
 *   FI_CLAIM[|FI_DISCARD] receives (or drops) the message claimed with this context
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "pfi.h"

#define EP(fep) container_of(fep, struct pfi_ep, ep)

static ssize_t t_recv(struct fid_ep *fep, void *buf, size_t len, void *desc, fi_addr_t src, uint64_t tag,
		      uint64_t ignore, void *context)
{
	(void)desc;
	return pfi_post_recv(EP(fep), PFI_CH_TAGGED, buf, len, src, tag, ignore, context, EP(fep)->rx_op_flags);
}

static ssize_t t_recvv(struct fid_ep *fep, const struct iovec *iov, void **desc, size_t count, fi_addr_t src,
		       uint64_t tag, uint64_t ignore, void *context)
{
	(void)desc;
	return pfi_post_recvv(EP(fep), PFI_CH_TAGGED, iov, count, src, tag, ignore, context, EP(fep)->rx_op_flags);
}

/* FI_PEEK (with FI_CLAIM or FI_DISCARD). */
static ssize_t peek(struct pfi_ep *ep, const struct fi_msg_tagged *msg, uint64_t flags)
{
	int node, ctx, rc;
	pn_port_status_t st;
	struct pfi_op tmp, *op;

	if (!ep->enabled)
		return -FI_EOPBADSTATE;
	if ((rc = pfi_ep_src(ep, msg->addr, &node, &ctx)) < 0)
		return rc;
	ep->cnt->peek++;
	rc = pn_port_probe(ep->port, node, ctx, PFI_CH_TAGGED, msg->tag, ~msg->ignore, &st);
	if (rc < 0)
		return pfi_errno(rc);
	memset(&tmp, 0, sizeof(tmp));
	tmp.context = msg->context;
	tmp.flags = FI_RECV | FI_TAGGED;
	tmp.comp = 1;
	if (rc == 0) {   /* nothing there */
		tmp.st.src_node = -1;
		pfi_op_complete(ep, &tmp, FI_ENOMSG, 0);
		return 0;
	}
	ep->cnt->peek_found++;
	if (flags & (FI_CLAIM | FI_DISCARD)) {
		int claim = !!(flags & FI_CLAIM);
		if (!(op = pfi_op_new(ep, claim ? OP_CLAIM : OP_DISCARD, msg->context, FI_RECV | FI_TAGGED)))
			return -FI_ENOMEM;
		if (claim && !(op->bounce = malloc(st.len ? st.len : 1))) {
			pfi_op_drop(ep, op);
			return -FI_ENOMEM;
		}
		rc = pn_port_irecvx(ep->port, st.src_node, st.src_ctx, PFI_CH_TAGGED, st.tag, ~0ull, op->bounce,
				    claim ? st.len : 0, claim ? 0 : PN_PORT_TRUNC, &op->req);
		if (rc < 0) {
			pfi_op_drop(ep, op);
			return pfi_errno(rc);
		}
		if (claim)
			ep->cnt->claim++;
		else
			ep->cnt->discard++;
		pfi_ep_track(ep, op);
	}
	/* The peek's completion: what was found (no data moved). */
	tmp.st = st;
	tmp.len = st.len;
	tmp.buf = NULL;
	pfi_op_complete(ep, &tmp, 0, 0);
	return 0;
}

static ssize_t t_recvmsg(struct fid_ep *fep, const struct fi_msg_tagged *msg, uint64_t flags)
{
	struct pfi_ep *ep = EP(fep);
	void *b;
	size_t n;
	if (!msg || pfi_iov1(msg->msg_iov, msg->iov_count, &b, &n) < 0 || (!b && n))
		return -FI_EINVAL;
	if (flags & FI_PEEK)
		return peek(ep, msg, flags);
	if (flags & FI_CLAIM) {
		struct pfi_op *op = pfi_ep_find_claim(ep, msg->context);
		if (!op)
			return -FI_EINVAL;   /* nothing was claimed with this context */
		op->kind = OP_CLAIMED;
		op->buf = b;
		op->len = n;
		op->discard = !!(flags & FI_DISCARD);
		op->comp = !ep->rx_sel || (flags & FI_COMPLETION);
		return 0;   /* completes at the next progress (or when its data is in) */
	}
	if (flags & FI_DISCARD)
		return -FI_EINVAL;   /* only with FI_PEEK or FI_CLAIM */
	return pfi_post_recv(ep, PFI_CH_TAGGED, b, n, msg->addr, msg->tag, msg->ignore, msg->context, flags);
}

static ssize_t t_send(struct fid_ep *fep, const void *buf, size_t len, void *desc, fi_addr_t dest, uint64_t tag,
		      void *context)
{
	(void)desc;
	return pfi_post_send(EP(fep), PFI_CH_TAGGED, buf, len, dest, tag, 0, context, EP(fep)->tx_op_flags, 0);
}

static ssize_t t_sendv(struct fid_ep *fep, const struct iovec *iov, void **desc, size_t count, fi_addr_t dest,
		       uint64_t tag, void *context)
{
	(void)desc;
	return pfi_post_sendv(EP(fep), PFI_CH_TAGGED, iov, count, dest, tag, 0, context, EP(fep)->tx_op_flags, 0);
}

static ssize_t t_sendmsg(struct fid_ep *fep, const struct fi_msg_tagged *msg, uint64_t flags)
{
	if (!msg)
		return -FI_EINVAL;
	return pfi_post_sendv(EP(fep), PFI_CH_TAGGED, msg->msg_iov, msg->iov_count, msg->addr, msg->tag, msg->data,
			      msg->context, flags, (flags & FI_INJECT) ? PFI_INJECT_FLAG : 0);
}

static ssize_t t_inject(struct fid_ep *fep, const void *buf, size_t len, fi_addr_t dest, uint64_t tag)
{
	return pfi_post_send(EP(fep), PFI_CH_TAGGED, buf, len, dest, tag, 0, NULL, 0, PFI_INJECT_CALL);
}

static ssize_t t_senddata(struct fid_ep *fep, const void *buf, size_t len, void *desc, uint64_t data,
			  fi_addr_t dest, uint64_t tag, void *context)
{
	(void)desc;
	return pfi_post_send(EP(fep), PFI_CH_TAGGED, buf, len, dest, tag, data, context,
			     EP(fep)->tx_op_flags | FI_REMOTE_CQ_DATA, 0);
}

static ssize_t t_injectdata(struct fid_ep *fep, const void *buf, size_t len, uint64_t data, fi_addr_t dest,
			    uint64_t tag)
{
	return pfi_post_send(EP(fep), PFI_CH_TAGGED, buf, len, dest, tag, data, NULL, FI_REMOTE_CQ_DATA,
			     PFI_INJECT_CALL);
}

struct fi_ops_tagged pfi_tagged_ops = {
	.size = sizeof(struct fi_ops_tagged),
	.recv = t_recv,
	.recvv = t_recvv,
	.recvmsg = t_recvmsg,
	.send = t_send,
	.sendv = t_sendv,
	.sendmsg = t_sendmsg,
	.inject = t_inject,
	.senddata = t_senddata,
	.injectdata = t_injectdata,
};
