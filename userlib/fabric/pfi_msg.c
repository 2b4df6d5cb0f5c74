/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * FI_MSG: untagged messages, on their own ports channel (PFI_CH_MSG), received in order
 * of arrival by the receives posted (from a given source with FI_DIRECTED_RECV). Each
 * call is pfi_post_send / pfi_post_recv (pfi_ep.c) on that channel with tag 0.
 */
#define _GNU_SOURCE
#include "pfi.h"

#define EP(fep) container_of(fep, struct pfi_ep, ep)

static ssize_t m_recv(struct fid_ep *fep, void *buf, size_t len, void *desc, fi_addr_t src, void *context)
{
	(void)desc;
	return pfi_post_recv(EP(fep), PFI_CH_MSG, buf, len, src, 0, 0, context, EP(fep)->rx_op_flags);
}

static ssize_t m_recvv(struct fid_ep *fep, const struct iovec *iov, void **desc, size_t count, fi_addr_t src,
		       void *context)
{
	(void)desc;
	return pfi_post_recvv(EP(fep), PFI_CH_MSG, iov, count, src, 0, 0, context, EP(fep)->rx_op_flags);
}

static ssize_t m_recvmsg(struct fid_ep *fep, const struct fi_msg *msg, uint64_t flags)
{
	if (!msg)
		return -FI_EINVAL;
	return pfi_post_recvv(EP(fep), PFI_CH_MSG, msg->msg_iov, msg->iov_count, msg->addr, 0, 0, msg->context,
			      flags);
}

static ssize_t m_send(struct fid_ep *fep, const void *buf, size_t len, void *desc, fi_addr_t dest, void *context)
{
	(void)desc;
	return pfi_post_send(EP(fep), PFI_CH_MSG, buf, len, dest, 0, 0, context, EP(fep)->tx_op_flags, 0);
}

static ssize_t m_sendv(struct fid_ep *fep, const struct iovec *iov, void **desc, size_t count, fi_addr_t dest,
		       void *context)
{
	(void)desc;
	return pfi_post_sendv(EP(fep), PFI_CH_MSG, iov, count, dest, 0, 0, context, EP(fep)->tx_op_flags, 0);
}

static ssize_t m_sendmsg(struct fid_ep *fep, const struct fi_msg *msg, uint64_t flags)
{
	if (!msg)
		return -FI_EINVAL;
	return pfi_post_sendv(EP(fep), PFI_CH_MSG, msg->msg_iov, msg->iov_count, msg->addr, 0, msg->data,
			      msg->context, flags, (flags & FI_INJECT) ? PFI_INJECT_FLAG : 0);
}

static ssize_t m_inject(struct fid_ep *fep, const void *buf, size_t len, fi_addr_t dest)
{
	return pfi_post_send(EP(fep), PFI_CH_MSG, buf, len, dest, 0, 0, NULL, 0, PFI_INJECT_CALL);
}

static ssize_t m_senddata(struct fid_ep *fep, const void *buf, size_t len, void *desc, uint64_t data,
			  fi_addr_t dest, void *context)
{
	(void)desc;
	return pfi_post_send(EP(fep), PFI_CH_MSG, buf, len, dest, 0, data, context,
			     EP(fep)->tx_op_flags | FI_REMOTE_CQ_DATA, 0);
}

static ssize_t m_injectdata(struct fid_ep *fep, const void *buf, size_t len, uint64_t data, fi_addr_t dest)
{
	return pfi_post_send(EP(fep), PFI_CH_MSG, buf, len, dest, 0, data, NULL, FI_REMOTE_CQ_DATA, PFI_INJECT_CALL);
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
