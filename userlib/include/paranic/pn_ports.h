/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * ports: ParaStation's system layer, modernised, over the HAL.
 *
 * A port is one process's endpoint: it owns one HAL context (any free context of its
 * node, or a given one) and is addressed by (node, context). Messages carry a 16-bit
 * channel and a 64-bit tag and are 0 .. PN_PORT_MAX_MSG bytes long; a receive names
 * a source port (or PN_PORT_ANY for node and/or context), a channel (or
 * PN_PORT_ANY) and a tag under a mask ((msg.tag & mask) == (tag & mask); mask 0 takes
 * any tag). Messages of one sender port to one receiver port are matched in the order
 * they were sent (so per channel too); the source a receive reports is the one the
 * sending NIC stamped into the packets, never anything from the payload.
 *
 * Up to the eager limit (PN_PORT_DEFAULT_EAGER_MAX, $PARANIC_EAGER_MAX, option) and
 * while the receiver has granted enough eager credit, the data goes at once and waits
 * in the receiver's unexpected queue when no receive is posted; above it (or out of
 * credit) the sender sends a request-to-send, the receiver answers clear-to-send when
 * a matching receive is posted, and the data goes by DMA straight into the posted
 * buffer (from the caller's buffer when it is registered memory, else through bounce
 * buffers). docs/ports.md describes the wire format, the flow control and the errors.
 *
 * Conventions as in pn_hal.h: 0 or a positive count on success, a negative errno code
 * on failure, nothing aborts. A port is used by one thread at a time. Every call makes
 * progress (receives packets, answers the protocol, streams rendezvous data).
 *
 * Errors of communication:
 *   -EHOSTUNREACH  the node does not exist (>= the job's node count)
 *   -EINVAL        bad argument: context >= contexts, channel outside 0..65535 (or
 *                  PN_PORT_ANY where a send needs a channel), NULL buffer with a
 *                  length, a length that is a negative number in disguise, NULL port
 *   -EMSGSIZE      a message longer than PN_PORT_MAX_MSG; a receive buffer smaller
 *                  than the message (the message stays queued, the status says its size)
 *   -ECONNREFUSED  no port answered at (node, context) within the timeout
 *   -ECONNRESET    the peer port closed, or was replaced by another process, while
 *                  the operation depended on it
 *   -ETIMEDOUT     the peer stopped answering (killed, or not calling the library for
 *                  longer than the timeout) while the operation depended on it; a
 *                  receive or wait whose own time limit passed
 *   -EFAULT        memory registration of memory that is not mapped / not DMA-able
 */
#ifndef PN_PORTS_H
#define PN_PORTS_H

#include <stddef.h>
#include <stdint.h>

#include "pn_hal.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PN_PORT_ANY (-1)                    /* any source node, context or channel */
#define PN_PORT_MAX_MSG (1u << 30)          /* largest message: 1 GiB */
#define PN_PORT_MAX_CHANNEL 0xffff          /* channels are 0 .. 65535 */
/* Eager up to this many bytes (chosen by measurement on sw and sim, docs/ports.md). */
#define PN_PORT_DEFAULT_EAGER_MAX 16384
#define PN_PORT_EAGER_LIMIT (256u * 1024u)  /* the largest eager limit one can set */
/* Eager credit a receiver grants each sender, in bytes (a message costs its length +
 * PN_PORT_MSG_COST): the bound on the memory one sender can make a receiver queue.
 * 0 (the default) means 8 * (eager_max + PN_PORT_MSG_COST), at least 64 KiB. */
#define PN_PORT_MSG_COST 64
#define PN_PORT_DEFAULT_TIMEOUT_MS 5000     /* connect and liveness timeout */
#define PN_PORT_CHUNK (128u * 1024u)        /* rendezvous DMA chunk through bounce buffers */

/* Flags of pn_port_isendx / pn_port_irecvx (and pn_port_status_t.flags). */
#define PN_PORT_DATA 1    /* send: the message carries 32 bits of immediate data */
#define PN_PORT_TRUNC 2   /* receive: a longer message is taken anyway: the first cap bytes land
			   * in buf, the rest is dropped, and the receive ends with -EMSGSIZE
			   * (the status says the message's length) */

typedef struct pn_port pn_port_t;
typedef struct pn_port_req pn_port_req_t;

typedef struct pn_port_opts {
	pn_open_opts_t hal;   /* the context: hal.ctx PN_CTX_ANY takes any free one */
	long eager_max;       /* -1: $PARANIC_EAGER_MAX, else PN_PORT_DEFAULT_EAGER_MAX */
	long eager_window;    /* -1: $PARANIC_EAGER_WINDOW, else the default above (0) */
	long timeout_ms;      /* -1: $PARANIC_PORT_TIMEOUT_MS, else PN_PORT_DEFAULT_TIMEOUT_MS */
	int shm;              /* the intra-node path: 1 ports of this node through shared memory,
			       * 0 everything through the NIC; -1: $PARANIC_PORT_SHM, else 1 */
} pn_port_opts_t;

/* What a completed receive (or a probe) found. */
typedef struct pn_port_status {
	int src_node;         /* the sender port, as its NIC stamped it */
	int src_ctx;
	int channel;
	uint64_t tag;
	size_t len;           /* the message's length (also on -EMSGSIZE) */
	int error;            /* 0 or the negative errno the operation ended with */
	uint32_t data;        /* the immediate data the sender gave (pn_port_isendx), with PN_PORT_DATA */
	unsigned flags;       /* PN_PORT_DATA: the message carries `data` */
} pn_port_status_t;

typedef struct pn_port_stats {
	uint32_t epoch;               /* random per open: tells incarnations of a port apart */
	uint32_t node, ctx;
	uint64_t sent_msgs, sent_bytes;   /* sends started (eager posted or rendezvous begun) */
	uint64_t recv_msgs, recv_bytes;   /* receives completed successfully */
	uint64_t eager_msgs, rndv_msgs;   /* how the sent messages went */
	uint64_t credit_fallbacks;    /* eager-sized messages sent by rendezvous for want of credit */
	uint64_t unexpected_msgs;     /* messages in the unexpected queue now (eager and RTS) */
	uint64_t unexpected_bytes;    /* eager payload bytes held for unexpected/out-of-order messages now */
	uint64_t unexpected_peak;     /* the most unexpected_bytes ever were */
	uint64_t held;                /* messages that arrived ahead of an earlier one (PIO overtook DMA) */
	uint64_t credit_pkts;         /* explicit credit returns sent */
	uint64_t pings, connects;     /* liveness probes and connection requests sent */
	uint64_t refused, resets, timeouts;   /* connections refused, reset by the peer, timed out */
	uint64_t foreign;             /* packets that are not ports protocol (dropped) */
	uint64_t stale;               /* packets of an unknown or past connection (dropped, NACKed) */
	uint64_t stray;               /* packets of no message in progress, or too long (dropped) */
	uint64_t overrun;             /* eager messages beyond the granted credit (dropped) */
	uint64_t aborted;             /* partial messages given up (the sender died or restarted) */
	uint64_t nomem;               /* messages dropped for want of memory */
	/* The intra-node path (docs/ports.md): ports of this node reached through shared memory. */
	uint64_t shm_msgs, shm_bytes;         /* of sent_msgs/sent_bytes: through shared memory */
	uint64_t shm_recv_msgs, shm_recv_bytes;   /* of recv_msgs/recv_bytes: through shared memory */
	uint64_t shm_peers;           /* same-node ports we have a shared-memory link to, now */
	uint64_t shm_full;            /* times a packet waited for room in a full ring */
	uint64_t shm_dead;            /* same-node peers found gone (their process), operations reset */
} pn_port_stats_t;

/* Fill opts with "unset" values (everything from the environment or defaults). */
void pn_port_opts_init(pn_port_opts_t *opts);
/* Open a port on a new HAL context. opts NULL: all from the environment (PARANIC_CTX
 * included, as pn_open(NULL)). -EINVAL for a negative eager limit or one above
 * PN_PORT_EAGER_LIMIT, a window below eager_max + PN_PORT_MSG_COST, a timeout < 1 ms. */
int pn_port_open(pn_port_t **out, const pn_port_opts_t *opts);
/* Close: waits (at most the timeout) for DMA in flight, tells every connected peer
 * (their operations with this port end with -ECONNRESET), releases the context.
 * Requests still pending are abandoned and freed: wait for them first. */
int pn_port_close(pn_port_t *p);

pn_hal_t *pn_port_hal(pn_port_t *p);   /* the context underneath (barrier, pn_dma_alloc) */
int pn_port_node(const pn_port_t *p);
int pn_port_ctx(const pn_port_t *p);
long pn_port_eager_max(const pn_port_t *p);
/* Set the eager limit (0 .. PN_PORT_EAGER_LIMIT and at most window - PN_PORT_MSG_COST);
 * returns the old one. */
long pn_port_set_eager_max(pn_port_t *p, long bytes);
int pn_port_stats(pn_port_t *p, pn_port_stats_t *st);

/* Register memory for in-place DMA of rendezvous sends (pn_mem_register, after
 * checking that [buf, buf+len) is mapped: -EFAULT otherwise). On sim only memory from
 * pn_dma_alloc(pn_port_hal(p), ...) is DMA-able (-EFAULT for anything else). */
int pn_port_mem_register(pn_port_t *p, void *buf, size_t len);
int pn_port_mem_deregister(pn_port_t *p, void *buf);

/* ---- send ------------------------------------------------------------------------------ */

/* Send len bytes to port (node, ctx) on `channel` with `tag`. Returns 0 once buf is
 * reusable: eager messages at once, rendezvous ones when the receiver has taken the
 * data (its matching receive was posted). The first message to a port connects to it
 * (-ECONNREFUSED when nothing answers within the timeout). */
int pn_port_send(pn_port_t *p, unsigned node, unsigned ctx, int channel, uint64_t tag,
		 const void *buf, size_t len);
/* The same without waiting: *req completes when buf is reusable. Argument errors are
 * returned at once (no request); errors of the transfer end the request. */
int pn_port_isend(pn_port_t *p, unsigned node, unsigned ctx, int channel, uint64_t tag,
		  const void *buf, size_t len, pn_port_req_t **req);

/* The same with 32 bits of immediate data (flags PN_PORT_DATA; 0: none, as
 * pn_port_isend), which the receiver finds in its status (st.data, st.flags). The data
 * travel in the message's header (docs/ports.md, wire format), at no extra packet. */
int pn_port_isendx(pn_port_t *p, unsigned node, unsigned ctx, int channel, uint64_t tag,
		   const void *buf, size_t len, uint32_t data, unsigned flags, pn_port_req_t **req);

/* ---- receive --------------------------------------------------------------------------- */

/* Receive the first matching message (unexpected ones first, in order) into buf.
 * Returns its length, the status in *st (may be NULL). timeout_ns < 0 waits forever,
 * 0 polls once; -ETIMEDOUT when no message matched in time (a message that matched
 * is always received whole: its transfer is bounded by the liveness timeout).
 * -EMSGSIZE: the message is longer than cap; it stays queued, st->len tells its size. */
int pn_port_recv(pn_port_t *p, int src_node, int src_ctx, int channel, uint64_t tag, uint64_t mask,
		 void *buf, size_t cap, pn_port_status_t *st, int64_t timeout_ns);
/* Post a receive; it completes when a matching message has been placed in buf (or
 * with -EMSGSIZE when a matching one is longer than cap: the message stays queued). */
int pn_port_irecv(pn_port_t *p, int src_node, int src_ctx, int channel, uint64_t tag, uint64_t mask,
		  void *buf, size_t cap, pn_port_req_t **req);
/* pn_port_irecv with flags: PN_PORT_TRUNC takes a matching message longer than cap
 * (truncated, -EMSGSIZE) instead of leaving it queued; 0 as pn_port_irecv. */
int pn_port_irecvx(pn_port_t *p, int src_node, int src_ctx, int channel, uint64_t tag, uint64_t mask,
		   void *buf, size_t cap, unsigned flags, pn_port_req_t **req);
/* 1 and the status of the first matching message that has arrived (complete or not:
 * its size is known) and is not yet taken by a receive, 0 if none. */
int pn_port_probe(pn_port_t *p, int src_node, int src_ctx, int channel, uint64_t tag, uint64_t mask,
		  pn_port_status_t *st);

/* ---- requests -------------------------------------------------------------------------- */

/* Make progress, then: 0 while *req is pending; 1 when it completed successfully, or
 * the negative errno it ended with; in both cases *req is freed and set to NULL and *st
 * (may be NULL) filled. -EINVAL (req untouched) for a NULL port or request. */
int pn_port_test(pn_port_t *p, pn_port_req_t **req, pn_port_status_t *st);
/* 1 when req has completed, 0 while it is pending, -EINVAL for NULL: no progress made
 * (a caller that polls many requests runs pn_port_progress once, then looks at each,
 * and collects the completed ones with pn_port_test). */
int pn_port_done(const pn_port_req_t *req);
/* Wait until *req completes (as pn_port_test), or -ETIMEDOUT after timeout_ns (< 0:
 * forever) with *req still pending. */
int pn_port_wait(pn_port_t *p, pn_port_req_t **req, pn_port_status_t *st, int64_t timeout_ns);
/* Withdraw a request that has not started: a receive not yet matched, a send not yet
 * begun (waiting for its connection or for earlier sends). 0 and *req freed; -EBUSY
 * when it has started (wait for it); -EALREADY when it has completed (test it). */
int pn_port_cancel(pn_port_t *p, pn_port_req_t **req);

/* Receive and answer what has arrived, send what waits (what every call does). */
int pn_port_progress(pn_port_t *p);
/* pn_barrier on the port's context, answering ports traffic while it waits. */
int pn_port_barrier(pn_port_t *p);

#ifdef __cplusplus
}
#endif
#endif /* PN_PORTS_H */
