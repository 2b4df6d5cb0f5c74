/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * rawdata: ParaStation's rawdata port over the HAL.
 *
 * Node-addressed messages of any size (0 .. PN_RD_MAX_MSG), cut into MTU packets
 * and reassembled; receive from any node or from a given node, packets from other
 * nodes arriving meanwhile are queued, never lost. One well-known context per node
 * (PN_RD_CTX, i.e. context 0) unless another is given at open: all peers of a job
 * use the same context id. Messages between one pair of nodes arrive in the order
 * they were sent. Errors are return codes (see pn_hal.h). docs/userlib.md describes
 * the packet format (the tag word) and the flow control.
 */
#ifndef PN_RAWDATA_H
#define PN_RAWDATA_H

#include <stddef.h>
#include <stdint.h>

#include "pn_hal.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PN_ANY (-1)                 /* receive from any node */
#define PN_RD_CTX 0                 /* rawdata's well-known context */
#define PN_RD_MAX_MSG (1u << 30)    /* largest message: 1 GiB */
#define PN_RD_CHUNK (128u * 1024u)  /* DMA chunk through the bounce buffers */

typedef struct pn_rd pn_rd_t;

typedef struct pn_rd_stats {
	uint64_t sent_msgs, sent_bytes;
	uint64_t recv_msgs, recv_bytes;   /* handed to the caller */
	uint64_t queued_msgs, queued_bytes; /* complete, waiting for a pn_rd_recv (now) */
	uint64_t aborted;   /* partial messages dropped: the sender restarted or broke off */
	uint64_t stray;     /* packets belonging to no message in progress (dropped) */
	uint64_t foreign;   /* packets that are not rawdata (wrong type, tag, context) */
	uint64_t nomem;     /* messages dropped because no memory could be had to queue them */
	uint64_t timeouts;  /* calls that gave up at the deadline (-ETIMEDOUT, -ENETDOWN) */
} pn_rd_stats_t;

/* Deadline (docs/userlib.md, "Deadlines"): a pn_rd_send (or pn_rd_close) whose sends
 * made no progress (no DMA descriptor completed, no PIO packet left the window) for this
 * long returns -ENETDOWN when the NIC reports a link DOWN, else -ETIMEDOUT; a pn_rd_recv
 * that got nothing for this long returns -ENETDOWN when a link is DOWN and no firmware
 * routes around it (otherwise it keeps waiting). Default PN_RD_DEFAULT_TIMEOUT_MS,
 * $PARANIC_RD_TIMEOUT_MS (milliseconds, 0: never) at open, or pn_rd_set_timeout. A send
 * that failed so may have delivered part of its message (the receiver drops it when
 * the next message starts) and leaves the context's sends stuck: close it. */
#define PN_RD_DEFAULT_TIMEOUT_MS 10000

/* Open a HAL context for rawdata: opts as pn_open (NULL: environment); opts->ctx
 * PN_CTX_ANY means PN_RD_CTX. */
int pn_rd_open(pn_rd_t **out, const pn_open_opts_t *opts);
/* Use an already open HAL context (rawdata then owns its receive side; pn_rd_close
 * leaves the context open). */
int pn_rd_attach(pn_rd_t **out, pn_hal_t *h);
/* Waits (up to the deadline) for its sends to leave, then closes: 0, or the deadline's
 * -ETIMEDOUT/-ENETDOWN when sends were abandoned (closed all the same). */
int pn_rd_close(pn_rd_t *rd);
pn_hal_t *pn_rd_hal(pn_rd_t *rd);

/* Send len bytes to dst_node. Returns 0 once the whole message has been handed to
 * the NIC (buf reusable). While waiting for room it keeps receiving into the queue,
 * so two nodes sending to each other never deadlock. */
int pn_rd_send(pn_rd_t *rd, unsigned dst_node, const void *buf, size_t len);

/* Receive the next message from src (a node id, or PN_ANY) into buf. Returns its
 * length (also in *len_out) and the sender in *src_out (either may be NULL).
 * -EMSGSIZE: the message is longer than cap; it stays queued, *len_out and *src_out
 * say which one, retry with a larger buffer (or learn the size with pn_rd_peek).
 * Blocks until a message is there (or -ENETDOWN: see the deadline above). */
int pn_rd_recv(pn_rd_t *rd, int src, void *buf, size_t cap, unsigned *src_out, size_t *len_out);
/* The same with a time limit: timeout_ns 0 polls once; -ETIMEDOUT when none came. */
int pn_rd_recv_timeout(pn_rd_t *rd, int src, void *buf, size_t cap, unsigned *src_out,
		       size_t *len_out, int64_t timeout_ns);
/* 1 and the sender and length of the next complete message from src (or PN_ANY),
 * 0 if none is complete yet. Never blocks. */
int pn_rd_peek(pn_rd_t *rd, int src, unsigned *src_out, size_t *len_out);
/* Move packets from the RX ring into the queue (what every call does anyway). */
int pn_rd_progress(pn_rd_t *rd);
int pn_rd_stats(pn_rd_t *rd, pn_rd_stats_t *st);
/* Set the deadline in milliseconds (0: never); -EINVAL on a negative one. */
int pn_rd_set_timeout(pn_rd_t *rd, int64_t timeout_ms);

#ifdef __cplusplus
}
#endif
#endif /* PN_RAWDATA_H */
