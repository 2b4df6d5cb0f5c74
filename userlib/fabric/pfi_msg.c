/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * FI_MSG: untagged messages, on their own ports channel (PFI_CH_MSG), received in order
 * of arrival by the receives posted (from a given source with FI_DIRECTED_RECV).
 */
#define _GNU_SOURCE
#include "pfi.h"

#define EP(fep) container_of(fep, struct pfi_ep, ep)

static ssize_t m_recv(struct fid_ep *fep, void *buf, size_t len, void *desc, fi_addr_t src, void *context)
{
	struct pfi_ep *ep = EP(fep);
	(void)desc;
	ep->cnt->recv++;
	return pfi_post_recv(ep, PFI_CH_MSG, buf, len, src, 0, 0, context, ep->rx_op_flags);
}

static ssize_t m_recvv(struct fid_ep *fep, const struct iovec *iov, void **desc, size_t count, fi_addr_t src,
		       void *context)
{
	void *b;
	size_t n;
	(void)desc;
	if (pfi_iov1(iov, count, &b, &n) < 0)
		return -FI_EINVAL;
	return m_recv(fep, b, n, NULL, src, context);
}

static ssize_t m_recvmsg(struct fid_ep *fep, const struct fi_msg *msg, uint64_t flags)
{
	struct pfi_ep *ep = EP(fep);
	void *b;
	size_t n;
	if (!msg || pfi_iov1(msg->msg_iov, msg->iov_count, &b, &n) < 0)
		return -FI_EINVAL;
	ep->cnt->recv++;
	return pfi_post_recv(ep, PFI_CH_MSG, b, n, msg->addr, 0, 0, msg->context, flags);
}

static ssize_t m_send(struct fid_ep *fep, const void *buf, size_t len, void *desc, fi_addr_t dest, void *context)
{
	struct pfi_ep *ep = EP(fep);
	(void)desc;
	ep->cnt->send++;
	return pfi_post_send(ep, PFI_CH_MSG, buf, len, dest, 0, 0, context, ep->tx_op_flags, 0);
}

static ssize_t m_sendv(struct fid_ep *fep, const struct iovec *iov, void **desc, size_t count, fi_addr_t dest,
		       void *context)
{
	void *b;
	size_t n;
	(void)desc;
	if (pfi_iov1(iov, count, &b, &n) < 0)
		return -FI_EINVAL;
	return m_send(fep, b, n, NULL, dest, context);
}

static ssize_t m_sendmsg(struct fid_ep *fep, const struct fi_msg *msg, uint64_t flags)
{
	struct pfi_ep *ep = EP(fep);
	void *b;
	size_t n;
	if (!msg || pfi_iov1(msg->msg_iov, msg->iov_count, &b, &n) < 0)
		return -FI_EINVAL;
	ep->cnt->send++;
	return pfi_post_send(ep, PFI_CH_MSG, b, n, msg->addr, 0, msg->data, msg->context, flags,
			     (flags & FI_INJECT) ? PFI_INJECT_FLAG : 0);
}

static ssize_t m_inject(struct fid_ep *fep, const void *buf, size_t len, fi_addr_t dest)
{
	struct pfi_ep *ep = EP(fep);
	ep->cnt->inject++;
	return pfi_post_send(ep, PFI_CH_MSG, buf, len, dest, 0, 0, NULL, 0, PFI_INJECT_CALL);
}

static ssize_t m_senddata(struct fid_ep *fep, const void *buf, size_t len, void *desc, uint64_t data,
			  fi_addr_t dest, void *context)
{
	struct pfi_ep *ep = EP(fep);
	(void)desc;
	ep->cnt->send++;
	return pfi_post_send(ep, PFI_CH_MSG, buf, len, dest, 0, data, context, ep->tx_op_flags | FI_REMOTE_CQ_DATA, 0);
}

static ssize_t m_injectdata(struct fid_ep *fep, const void *buf, size_t len, uint64_t data, fi_addr_t dest)
{
	struct pfi_ep *ep = EP(fep);
	ep->cnt->inject++;
	return pfi_post_send(ep, PFI_CH_MSG, buf, len, dest, 0, data, NULL, FI_REMOTE_CQ_DATA, PFI_INJECT_CALL);
}

struct fi_ops_msg pfi_msg_ops = {
	.size = sizeof(struct fi_ops_msg),
	.recv = m_recv,
	.recvv = m_recvv,
	.recvmsg = m_recvmsg,
	.send = m_send,
	.sendv = m_sendv,
	.sendmsg = m_sendmsg,
	.inject = m_inject,
	.senddata = m_senddata,
	.injectdata = m_injectdata,
};
