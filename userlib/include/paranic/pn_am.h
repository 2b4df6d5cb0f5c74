/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Active messages (SSAM, EPOS) and RMA / remote copy (BCL's open channels, EPOS's
 * asynchronous remote copy) over a port (pn_ports.h). docs/am.md describes the API,
 * the wire format (src/am_wire.h), the flow control and the errors.
 *
 * An endpoint lives on a port and takes one of its channels (default 65535) for its
 * messages and one (default 65534) for RMA data. pn_am_request() runs handler `handler`
 * of the endpoint at (node, ctx) during that process's next AM call; a request handler
 * may send one pn_am_reply(), which runs a handler at the requester. At most `window`
 * requests (and RMA operations) are outstanding per peer: a request beyond the window
 * serves incoming messages until an answer (a reply, the automatic acknowledgement of
 * a handler that did not reply, or an error) frees a slot. Handlers run only inside
 * AM calls of the receiving process (target-side progress; RMA too): every process
 * must call into the library (pn_am_poll at least) while others wait for it, at least
 * once per timeout.
 *
 * Conventions as in pn_hal.h: 0 or a positive count on success, a negative errno on
 * failure, nothing aborts. An endpoint is used by one thread at a time; the port under
 * it may still be used directly on other channels.
 *
 *   -EINVAL        bad argument (NULL, handler index >= PN_AM_MAX_HANDLERS, nargs >
 *                  PN_AM_MAX_ARGS, context >= contexts, NULL buffer with a length, bad flags)
 *   -EHOSTUNREACH  node >= the job's node count
 *   -EMSGSIZE      payload longer than the endpoint's max_payload
 *   -EAGAIN        a request from inside a handler while the window to that peer is full
 *   -EDEADLK       pn_am_poll / barrier / flush / wait from inside a handler
 *   -ENOENT        (error callback) the receiver has no handler at that index
 *   -ETIMEDOUT, -ECONNRESET, -ECONNREFUSED (error callback, RMA requests) the peer died,
 *                  was replaced by a new process, or never answered
 *   -EFAULT        RMA: unknown key, [offset, offset+len) outside the region; register:
 *                  memory that is not mapped
 *   -EACCES        RMA: put into a region registered without PN_RMA_WRITE, get from one
 *                  without PN_RMA_READ
 */
#ifndef PN_AM_H
#define PN_AM_H

#include <stddef.h>
#include <stdint.h>

#include "pn_ports.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PN_AM_DEFAULT_CHANNEL 65535
#define PN_AM_DEFAULT_RMA_CHANNEL 65534
#define PN_AM_DEFAULT_WINDOW 16           /* requests outstanding per peer */
#define PN_AM_MAX_WINDOW 4096
#define PN_AM_MAX_HANDLERS 256            /* handler indices 0 .. 255 */
#define PN_AM_MAX_ARGS 8                  /* 64-bit arguments per request or reply */
#define PN_AM_DEFAULT_MAX_PAYLOAD 65536   /* bytes of payload per request or reply */
#define PN_AM_MAX_PAYLOAD_LIMIT (16u << 20)   /* the largest max_payload one can set */

#define PN_RMA_READ 1u                    /* region flags: others may get from it */
#define PN_RMA_WRITE 2u                   /* others may put into it */

typedef struct pn_am pn_am_t;
typedef struct pn_rma_req pn_rma_req_t;

/* What a handler is told about the message it runs for. */
typedef struct pn_am_token {
	pn_am_t *am;
	int src_node, src_ctx;   /* the sender's port, as its NIC stamped it */
	unsigned handler;        /* the index this handler runs at */
	int is_request;          /* 1: a request handler (may reply once), 0: a reply handler */
	int replied;             /* set by pn_am_reply */
	uint32_t seq;            /* the request's number (private) */
} pn_am_token_t;

/* payload points into the library's buffer, valid until the handler returns. */
typedef void (*pn_am_handler_t)(pn_am_token_t *tok, const uint64_t *args, unsigned nargs, void *payload,
				size_t len, void *arg);

/* A request (or RMA operation without a request handle) that failed. */
typedef struct pn_am_error {
	int node, ctx;           /* the peer */
	unsigned handler;        /* the request's handler index (RMA: 0) */
	int error;               /* -ENOENT, -ETIMEDOUT, -ECONNRESET ... */
	uint64_t arg0;           /* the request's first argument (0 if none): to tell requests apart */
	int is_rma;              /* 1: an RMA operation issued with req == NULL */
} pn_am_error_t;
typedef void (*pn_am_error_fn)(pn_am_t *am, const pn_am_error_t *e, void *arg);

typedef struct pn_am_opts {
	int channel;             /* -1: PN_AM_DEFAULT_CHANNEL */
	int rma_channel;         /* -1: PN_AM_DEFAULT_RMA_CHANNEL */
	long window;             /* -1: $PARANIC_AM_WINDOW, else PN_AM_DEFAULT_WINDOW (1 .. PN_AM_MAX_WINDOW) */
	long max_payload;        /* -1: $PARANIC_AM_MAX_PAYLOAD, else PN_AM_DEFAULT_MAX_PAYLOAD */
	long timeout_ms;         /* -1: $PARANIC_PORT_TIMEOUT_MS, else PN_PORT_DEFAULT_TIMEOUT_MS */
	pn_am_error_fn on_error; /* NULL: errors are only counted (pn_am_stats) */
	void *error_arg;
} pn_am_opts_t;

typedef struct pn_am_stats {
	uint64_t requests, replies, acks, errors_sent;   /* sent: requests; replies, automatic acks, error answers */
	uint64_t handled_requests, handled_replies;      /* handlers run */
	uint64_t unknown_handler;    /* requests (or replies) for a handler index nobody registered */
	uint64_t errors;             /* requests and implicit RMA ops that ended with an error here */
	uint64_t window_waits;       /* requests (and RMA ops) that had to wait for a window slot */
	uint64_t window_wait_ns;     /* the time they waited */
	uint64_t outstanding;        /* requests and RMA ops awaiting their answer now, all peers */
	uint64_t peak_outstanding;   /* the most ever outstanding to one peer (<= window) */
	uint64_t pings, pongs, peer_failures;
	uint64_t rma_puts, rma_gets;         /* initiated */
	uint64_t rma_served, rma_refused;    /* as target: accepted; refused (bad key, bounds, permission) */
	uint64_t rma_bytes_in, rma_bytes_out;   /* as target: put into, got from the regions */
	uint64_t rma_inflight;       /* as target: transfers moving into or out of regions now */
	uint64_t barriers;
} pn_am_stats_t;

void pn_am_opts_init(pn_am_opts_t *opts);
/* Open an endpoint on port (the port stays the caller's: close it after pn_am_close).
 * opts NULL: all defaults/environment. -EINVAL: bad option, channels equal or outside
 * 0 .. 65535. */
int pn_am_open(pn_am_t **out, pn_port_t *port, const pn_am_opts_t *opts);
/* Waits (bounded by the liveness timeout) for this endpoint's outstanding requests
 * and RMA operations and for data moving into or out of its regions, then for its sends
 * (receiving meanwhile; given up once none completed for the timeout), then frees it.
 * RMA requests nobody tested are freed. 0, or -ETIMEDOUT when sends were given up (it is
 * closed all the same). */
int pn_am_close(pn_am_t *am);

/* Install (fn NULL: remove) the handler at index 0 .. PN_AM_MAX_HANDLERS-1. */
int pn_am_register(pn_am_t *am, unsigned index, pn_am_handler_t fn, void *arg);

/* Send a request: runs handler `handler` at the endpoint of port (node, ctx) with the
 * nargs arguments and len bytes of payload (copied: buffers are reusable on return).
 * Returns 0 once sent; waits (serving incoming messages) while the window to that peer
 * is full, and returns the peer's error if it fails meanwhile. Errors of the request
 * at the receiver reach the error callback. */
int pn_am_request(pn_am_t *am, unsigned node, unsigned ctx, unsigned handler, const uint64_t *args,
		  unsigned nargs, const void *payload, size_t len);
/* From a request handler only, once: runs handler `handler` at the requester.
 * -EALREADY on a second reply, -EINVAL from a reply handler. */
int pn_am_reply(pn_am_token_t *tok, unsigned handler, const uint64_t *args, unsigned nargs,
		const void *payload, size_t len);
/* Run the handlers of what has arrived, answer, progress RMA: the number of messages
 * handled (0 if none). */
int pn_am_poll(pn_am_t *am);
/* Poll until every request and RMA operation of this endpoint has been answered (or
 * failed); 0, or -ETIMEDOUT when timeout_ns (< 0: forever) passed first. */
int pn_am_flush(pn_am_t *am, int64_t timeout_ns);
/* Barrier of the endpoints at this endpoint's context on every node (a dissemination
 * barrier in AM messages: it serves requests while it waits). */
int pn_am_barrier(pn_am_t *am);
int pn_am_stats(pn_am_t *am, pn_am_stats_t *st);
pn_port_t *pn_am_port(pn_am_t *am);
size_t pn_am_max_payload(const pn_am_t *am);
unsigned pn_am_window(const pn_am_t *am);

/* ---- RMA ------------------------------------------------------------------------------- */

/* Expose [buf, buf+len) to the other endpoints with flags PN_RMA_READ | PN_RMA_WRITE;
 * *key names it (keys are never reused within an endpoint). The region is also
 * registered with the port for in-place DMA where the backend allows it. -EFAULT when
 * the range is not mapped, -EINVAL for len 0 or bad flags. */
int pn_rma_register(pn_am_t *am, void *buf, size_t len, unsigned flags, uint64_t *key);
/* Withdraw a region: operations that arrive afterwards fail with -EFAULT; transfers
 * already moving into or out of it finish first (this call serves the endpoint until
 * they have, bounded by the liveness timeout). Then the memory is the caller's again. */
int pn_rma_deregister(pn_am_t *am, uint64_t key);

/* Copy len bytes from src into region `key` of the endpoint at (node, ctx) at offset.
 * src must stay unchanged until the operation completes. req NULL: completion only by
 * pn_rma_flush (errors to the error callback). Completion means the data is in the
 * target's memory. Argument errors at once; -EFAULT/-EACCES from the target end the
 * request, the target's memory untouched. */
int pn_rma_put(pn_am_t *am, unsigned node, unsigned ctx, uint64_t key, uint64_t offset, const void *src,
	       size_t len, pn_rma_req_t **req);
/* Copy len bytes of region `key` at offset into dst. */
int pn_rma_get(pn_am_t *am, unsigned node, unsigned ctx, uint64_t key, uint64_t offset, void *dst,
	       size_t len, pn_rma_req_t **req);
/* 0 while pending; 1 when done; or the negative errno it ended with: then *req is
 * freed and NULL. */
int pn_rma_test(pn_am_t *am, pn_rma_req_t **req);
int pn_rma_wait(pn_am_t *am, pn_rma_req_t **req, int64_t timeout_ns);
/* Wait until every RMA operation of this endpoint has completed (requests included,
 * they stay to be tested): 0, or the first error of an operation issued without a
 * request since the last flush. */
int pn_rma_flush(pn_am_t *am);
/* Ordering point: operations issued after it start after every earlier one has
 * completed (blocking: the same as pn_rma_flush). */
int pn_rma_fence(pn_am_t *am);

#ifdef __cplusplus
}
#endif
#endif /* PN_AM_H */
