/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Collectives: reduce, allreduce and broadcast of a small vector (0 .. PN_COLL_MAX_BYTES
 * bytes) over every node of the job, one port per node (ids 0 .. nodes-1, all on the
 * same context number as the caller's port).
 *
 * The operations, element types, operators, error bits, size limit and combining tree
 * are those of the in-network collective unit (HLS kernel hls/collective, spec
 * paranic/spec/kernels.py; the constants come from the generated pn_coll_spec.h).
 * A call goes to the NIC's collective unit when this context owns it (a node's unit
 * belongs to the first context that sends it a command, until that context closes),
 * else in software over ports (channel PN_COLL_CHANNEL), with the same results bit for
 * bit (except an all-to-all ALLREDUCE's order, below). $PARANIC_COLL chooses, at the first call: "auto" (default: the unit, else
 * software; on the sw backend, software), "hw" (the unit only: -ENODEV on a context
 * without one), "sw" (software only); another value: -EINVAL. Every node of an
 * operation must take the same path.
 *
 * Reduction order: the implicit 4-ary heap over relative ids r = (node - root) mod
 * nodes; every node combines its own vector, then its children's partial results in
 * increasing r. ALLREDUCE reduces to node 0 and sends the root's bits down the same
 * tree, so every node receives identical bits (float sums included). On the unit, an
 * ALLREDUCE of a job of at most $PARANIC_COLL_A2A_MAX nodes (0 .. 4096, default
 * PN_COLL_DEFAULT_A2A_MAX = 32, at most PN_COLL_A2A_MAX_NODES; 0: never) goes
 * all-to-all: every node sends its vector to every other and folds all of them in node
 * order, ((v0 op v1) op v2) ... op v(n-1), the same bits on every node.
 *
 * Every node of the job must make the same sequence of calls (each call is one
 * "episode"). Results (the same on every node of the operation):
 *   0            success
 *   -EINVAL      bad arguments on some node: nbytes over PN_COLL_MAX_BYTES or not a
 *                multiple of the element size, unknown dtype/red, AND/OR on a float
 *                type, root >= nodes, a NULL buffer with nbytes > 0. The node that has
 *                them still takes part in one header round (as the kernel does), so nobody
 *                waits for it; the others learn it from the err bits. A NULL port returns
 *                -EINVAL at once, locally.
 *   -EBADMSG     the nodes disagree on op, dtype, red, nbytes or root
 *   -ETIMEDOUT   a neighbour in the tree was silent for the timeout (killed, or entered
 *                the operation that much later), here or anywhere in the tree: the node
 *                that saw it aborts its neighbours, and they theirs, with its error. The
 *                timeout: $PARANIC_COLL_TIMEOUT_MS (1 .. 3600000 ms), else the port's
 *                ($PARANIC_PORT_TIMEOUT_MS, default 5 s); read at the first call (a bad
 *                value: -EINVAL at once)
 *   -ECONNRESET  (or other negative errno of ports) the same, from a ports operation
 *   -ENODEV      PARANIC_COLL=hw and this context has no collective unit (this node only)
 *   -ENOTRECOVERABLE  an earlier call timed out on the unit, which may hold part of that
 *                operation: the port must be opened again (the unit is reset then)
 * On the unit a node that dies leaves the others waiting for the timeout (-ETIMEDOUT);
 * there is no ABORT message in the network.
 * Buffers: in and out may be the same; they are untouched on error (out may be half
 * written by nobody: results are written only on success).
 */
#ifndef PN_COLL_H
#define PN_COLL_H

#include <stddef.h>

#include "pn_coll_spec.h"
#include "pn_ports.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The ports channel of the software path (the AM layer takes 65535 and 65534). */
#define PN_COLL_CHANNEL 65533

/* Every node receives the combination of every node's `in` in `out`. */
int pn_allreduce(pn_port_t *p, const void *in, void *out, size_t nbytes, int dtype, int red);
/* Node `root` receives the combination in `out` (others: out unused, may be NULL). */
int pn_reduce(pn_port_t *p, unsigned root, const void *in, void *out, size_t nbytes, int dtype, int red);
/* Every node receives root's buf in buf. */
int pn_bcast(pn_port_t *p, unsigned root, void *buf, size_t nbytes);
/* Take this node's collective unit for the port's context now, without communicating:
 * 0 (it is this context's: the calls take the unit from now on, whatever PARANIC_COLL
 * says), -ENODEV (another context has it, the NIC has none, or the sw backend), or
 * another negative errno of the NIC. For a program that must agree with its peers on
 * the path before the first call (the MPI library does: userlib/mpi/pn_mpicoll.c). */
int pn_coll_claim(pn_port_t *p);
/* Non-blocking, on the unit only (after pn_coll_claim returned 0): pn_coll_start posts
 * an operation (op PN_COLL_OP_*; the arguments as the calls above; `in` is copied at
 * once), then pn_coll_test(p, out) until it returns 1 (done: out written as the blocking
 * call writes it) or a negative errno (the blocking call's). One operation at a time per
 * port (-EBUSY); -ENODEV without the unit. For a caller that must keep another progress
 * engine running while it waits (the MPI library). */
int pn_coll_start(pn_port_t *p, int op, unsigned root, const void *in, size_t nbytes, int dtype, int red);
int pn_coll_test(pn_port_t *p, void *out);
/* The path this port's collectives take: "unit" (the NIC's collective unit), "sw"
 * (software over ports), "undecided" (no call yet), "failed" (the unit timed out: every
 * call returns -ENOTRECOVERABLE until the port is opened again); NULL port: "?". */
const char *pn_coll_path(const pn_port_t *p);

#ifdef __cplusplus
}
#endif
#endif /* PN_COLL_H */
