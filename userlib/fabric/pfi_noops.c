/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The operation tables of what the provider does not offer (FI_RMA, FI_ATOMIC, collectives):
 * every entry fails with -FI_ENOSYS, so a program that calls fi_write(), fi_atomic() or
 * fi_barrier() on a paranic endpoint anyway gets an error, not a call through a NULL table
 * (libfabric's inline wrappers do not check). Debian ships no fi_no_* helpers for
 * external providers. The signatures are libfabric 1.17's.
 */
#define _GNU_SOURCE
#include "pfi.h"

#include <rdma/fi_atomic.h>
#include <rdma/fi_collective.h>
#include <rdma/fi_rma.h>

#pragma GCC diagnostic ignored "-Wunused-parameter"

static ssize_t no_rma_read(struct fid_ep *ep, void *buf, size_t len, void *desc, fi_addr_t src_addr, uint64_t addr, uint64_t key, void *context)
{
	return -FI_ENOSYS;
}

static ssize_t no_rma_readv(struct fid_ep *ep, const struct iovec *iov, void **desc, size_t count, fi_addr_t src_addr, uint64_t addr, uint64_t key, void *context)
{
	return -FI_ENOSYS;
}

static ssize_t no_rma_readmsg(struct fid_ep *ep, const struct fi_msg_rma *msg, uint64_t flags)
{
	return -FI_ENOSYS;
}

static ssize_t no_rma_write(struct fid_ep *ep, const void *buf, size_t len, void *desc, fi_addr_t dest_addr, uint64_t addr, uint64_t key, void *context)
{
	return -FI_ENOSYS;
}

static ssize_t no_rma_writev(struct fid_ep *ep, const struct iovec *iov, void **desc, size_t count, fi_addr_t dest_addr, uint64_t addr, uint64_t key, void *context)
{
	return -FI_ENOSYS;
}

static ssize_t no_rma_writemsg(struct fid_ep *ep, const struct fi_msg_rma *msg, uint64_t flags)
{
	return -FI_ENOSYS;
}

static ssize_t no_rma_inject(struct fid_ep *ep, const void *buf, size_t len, fi_addr_t dest_addr, uint64_t addr, uint64_t key)
{
	return -FI_ENOSYS;
}

static ssize_t no_rma_writedata(struct fid_ep *ep, const void *buf, size_t len, void *desc, uint64_t data, fi_addr_t dest_addr, uint64_t addr, uint64_t key, void *context)
{
	return -FI_ENOSYS;
}

static ssize_t no_rma_injectdata(struct fid_ep *ep, const void *buf, size_t len, uint64_t data, fi_addr_t dest_addr, uint64_t addr, uint64_t key)
{
	return -FI_ENOSYS;
}

struct fi_ops_rma pfi_no_rma_ops = {
	.size = sizeof(struct fi_ops_rma),
	.read = no_rma_read,
	.readv = no_rma_readv,
	.readmsg = no_rma_readmsg,
	.write = no_rma_write,
	.writev = no_rma_writev,
	.writemsg = no_rma_writemsg,
	.inject = no_rma_inject,
	.writedata = no_rma_writedata,
	.injectdata = no_rma_injectdata,
};

static ssize_t no_atomic_write(struct fid_ep *ep, const void *buf, size_t count, void *desc, fi_addr_t dest_addr, uint64_t addr, uint64_t key, enum fi_datatype datatype, enum fi_op op, void *context)
{
	return -FI_ENOSYS;
}

static ssize_t no_atomic_writev(struct fid_ep *ep, const struct fi_ioc *iov, void **desc, size_t count, fi_addr_t dest_addr, uint64_t addr, uint64_t key, enum fi_datatype datatype, enum fi_op op, void *context)
{
	return -FI_ENOSYS;
}

static ssize_t no_atomic_writemsg(struct fid_ep *ep, const struct fi_msg_atomic *msg, uint64_t flags)
{
	return -FI_ENOSYS;
}

static ssize_t no_atomic_inject(struct fid_ep *ep, const void *buf, size_t count, fi_addr_t dest_addr, uint64_t addr, uint64_t key, enum fi_datatype datatype, enum fi_op op)
{
	return -FI_ENOSYS;
}

static ssize_t no_atomic_readwrite(struct fid_ep *ep, const void *buf, size_t count, void *desc, void *result, void *result_desc, fi_addr_t dest_addr, uint64_t addr, uint64_t key, enum fi_datatype datatype, enum fi_op op, void *context)
{
	return -FI_ENOSYS;
}

static ssize_t no_atomic_readwritev(struct fid_ep *ep, const struct fi_ioc *iov, void **desc, size_t count, struct fi_ioc *resultv, void **result_desc, size_t result_count, fi_addr_t dest_addr, uint64_t addr, uint64_t key, enum fi_datatype datatype, enum fi_op op, void *context)
{
	return -FI_ENOSYS;
}

static ssize_t no_atomic_readwritemsg(struct fid_ep *ep, const struct fi_msg_atomic *msg, struct fi_ioc *resultv, void **result_desc, size_t result_count, uint64_t flags)
{
	return -FI_ENOSYS;
}

static ssize_t no_atomic_compwrite(struct fid_ep *ep, const void *buf, size_t count, void *desc, const void *compare, void *compare_desc, void *result, void *result_desc, fi_addr_t dest_addr, uint64_t addr, uint64_t key, enum fi_datatype datatype, enum fi_op op, void *context)
{
	return -FI_ENOSYS;
}

static ssize_t no_atomic_compwritev(struct fid_ep *ep, const struct fi_ioc *iov, void **desc, size_t count, const struct fi_ioc *comparev, void **compare_desc, size_t compare_count, struct fi_ioc *resultv, void **result_desc, size_t result_count, fi_addr_t dest_addr, uint64_t addr, uint64_t key, enum fi_datatype datatype, enum fi_op op, void *context)
{
	return -FI_ENOSYS;
}

static ssize_t no_atomic_compwritemsg(struct fid_ep *ep, const struct fi_msg_atomic *msg, const struct fi_ioc *comparev, void **compare_desc, size_t compare_count, struct fi_ioc *resultv, void **result_desc, size_t result_count, uint64_t flags)
{
	return -FI_ENOSYS;
}

static int no_atomic_writevalid(struct fid_ep *ep, enum fi_datatype datatype, enum fi_op op, size_t *count)
{
	return -FI_ENOSYS;
}

static int no_atomic_readwritevalid(struct fid_ep *ep, enum fi_datatype datatype, enum fi_op op, size_t *count)
{
	return -FI_ENOSYS;
}

static int no_atomic_compwritevalid(struct fid_ep *ep, enum fi_datatype datatype, enum fi_op op, size_t *count)
{
	return -FI_ENOSYS;
}

struct fi_ops_atomic pfi_no_atomic_ops = {
	.size = sizeof(struct fi_ops_atomic),
	.write = no_atomic_write,
	.writev = no_atomic_writev,
	.writemsg = no_atomic_writemsg,
	.inject = no_atomic_inject,
	.readwrite = no_atomic_readwrite,
	.readwritev = no_atomic_readwritev,
	.readwritemsg = no_atomic_readwritemsg,
	.compwrite = no_atomic_compwrite,
	.compwritev = no_atomic_compwritev,
	.compwritemsg = no_atomic_compwritemsg,
	.writevalid = no_atomic_writevalid,
	.readwritevalid = no_atomic_readwritevalid,
	.compwritevalid = no_atomic_compwritevalid,
};

static ssize_t no_coll_barrier(struct fid_ep *ep, fi_addr_t coll_addr, void *context)
{
	return -FI_ENOSYS;
}

static ssize_t no_coll_broadcast(struct fid_ep *ep, void *buf, size_t count, void *desc, fi_addr_t coll_addr, fi_addr_t root_addr, enum fi_datatype datatype, uint64_t flags, void *context)
{
	return -FI_ENOSYS;
}

static ssize_t no_coll_alltoall(struct fid_ep *ep, const void *buf, size_t count, void *desc, void *result, void *result_desc, fi_addr_t coll_addr, enum fi_datatype datatype, uint64_t flags, void *context)
{
	return -FI_ENOSYS;
}

static ssize_t no_coll_allreduce(struct fid_ep *ep, const void *buf, size_t count, void *desc, void *result, void *result_desc, fi_addr_t coll_addr, enum fi_datatype datatype, enum fi_op op, uint64_t flags, void *context)
{
	return -FI_ENOSYS;
}

static ssize_t no_coll_allgather(struct fid_ep *ep, const void *buf, size_t count, void *desc, void *result, void *result_desc, fi_addr_t coll_addr, enum fi_datatype datatype, uint64_t flags, void *context)
{
	return -FI_ENOSYS;
}

static ssize_t no_coll_reduce_scatter(struct fid_ep *ep, const void *buf, size_t count, void *desc, void *result, void *result_desc, fi_addr_t coll_addr, enum fi_datatype datatype, enum fi_op op, uint64_t flags, void *context)
{
	return -FI_ENOSYS;
}

static ssize_t no_coll_reduce(struct fid_ep *ep, const void *buf, size_t count, void *desc, void *result, void *result_desc, fi_addr_t coll_addr, fi_addr_t root_addr, enum fi_datatype datatype, enum fi_op op, uint64_t flags, void *context)
{
	return -FI_ENOSYS;
}

static ssize_t no_coll_scatter(struct fid_ep *ep, const void *buf, size_t count, void *desc, void *result, void *result_desc, fi_addr_t coll_addr, fi_addr_t root_addr, enum fi_datatype datatype, uint64_t flags, void *context)
{
	return -FI_ENOSYS;
}

static ssize_t no_coll_gather(struct fid_ep *ep, const void *buf, size_t count, void *desc, void *result, void *result_desc, fi_addr_t coll_addr, fi_addr_t root_addr, enum fi_datatype datatype, uint64_t flags, void *context)
{
	return -FI_ENOSYS;
}

static ssize_t no_coll_msg(struct fid_ep *ep, const struct fi_msg_collective *msg, struct fi_ioc *resultv, void **result_desc, size_t result_count, uint64_t flags)
{
	return -FI_ENOSYS;
}

static ssize_t no_coll_barrier2(struct fid_ep *ep, fi_addr_t coll_addr, uint64_t flags, void *context)
{
	return -FI_ENOSYS;
}

struct fi_ops_collective pfi_no_coll_ops = {
	.size = sizeof(struct fi_ops_collective),
	.barrier = no_coll_barrier,
	.broadcast = no_coll_broadcast,
	.alltoall = no_coll_alltoall,
	.allreduce = no_coll_allreduce,
	.allgather = no_coll_allgather,
	.reduce_scatter = no_coll_reduce_scatter,
	.reduce = no_coll_reduce,
	.scatter = no_coll_scatter,
	.gather = no_coll_gather,
	.msg = no_coll_msg,
	.barrier2 = no_coll_barrier2,
};
