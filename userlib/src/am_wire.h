/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The wire format of active messages and RMA (userlib/src/am_*.c, docs/am.md): one place.
 *
 * Every AM message is one ports message on the endpoint's AM channel (default 65535):
 * a 24-byte header, nargs 64-bit arguments, then the payload. RMA data moves as plain
 * ports messages on the RMA channel (default 65534), tagged with the initiator's
 * operation id, straight between the user's buffer and the registered region.
 * All fields little-endian (the host's order: every supported host is little-endian).
 */
#ifndef PN_AM_WIRE_H
#define PN_AM_WIRE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

enum paw_kind {
	PAW_REQ = 1,      /* request: handler, args, payload; takes a window slot */
	PAW_REP = 2,      /* reply to request `seq`: handler, args, payload; frees the slot */
	PAW_ACK = 3,      /* credit only: the request handler did not reply */
	PAW_ERR = 4,      /* request `seq` failed at the receiver: err (-ENOENT: no handler) */
	PAW_PING = 5,     /* liveness probe: a = window messages sent to the peer (since it last failed) */
	PAW_PONG = 6,     /* answer: a = window messages received from the pinger's incarnation, seq = the PING's a */
	PAW_BAR = 7,      /* dissemination barrier: a = round */
	PAW_PUT = 8,      /* RMA put, data inline: args key, offset, opid; takes a slot */
	PAW_PUTRTS = 9,   /* RMA put, data follows on GO: args key, offset, len, opid; takes a slot */
	PAW_GO = 10,      /* target accepted PUTRTS `seq` and posted its receive */
	PAW_GET = 11,     /* RMA get: args key, offset, len, opid; takes a slot */
	PAW_RMAACK = 12,  /* final answer of an RMA op `seq`: err (0, -EFAULT, -EACCES) */
};

struct paw_hdr {
	uint8_t kind;      /* enum paw_kind */
	uint8_t nargs;     /* 64-bit arguments after the header */
	uint16_t handler;  /* REQ, REP: handler index */
	uint32_t epoch;    /* the sending endpoint's incarnation (random per open) */
	uint32_t seq;      /* window messages: their number on (sender -> receiver); answers: echoed */
	int32_t err;       /* ERR, RMAACK: 0 or a negative errno */
	uint32_t len;      /* payload bytes after the arguments */
	uint32_t a;        /* PING, PONG: counts; BAR: round */
};

_Static_assert(sizeof(struct paw_hdr) == 24, "paw_hdr is 24 bytes");

#define PAW_MAX_ARGS 8
#define PAW_HDR_MAX (sizeof(struct paw_hdr) + 8 * PAW_MAX_ARGS)

/* RMA argument slots */
enum { PAW_A_KEY = 0, PAW_A_OFF = 1, PAW_A_LEN = 2, PAW_A_OPID = 3 };

/* One received AM message (n bytes at buf, from another process): 0 with the header in
 * *h, its h->nargs arguments in args[] (room for PAW_MAX_ARGS) and *payload pointing at
 * its h->len payload bytes inside buf; -1 when the sizes do not add up to n exactly.
 * Fuzzed by tests/fuzz/fuzz_am.c. */
static inline int paw_parse(const uint8_t *buf, size_t n, struct paw_hdr *h, uint64_t *args, const uint8_t **payload)
{
	if (!buf || n < sizeof(*h))
		return -1;
	memcpy(h, buf, sizeof(*h));
	if (h->nargs > PAW_MAX_ARGS || sizeof(*h) + 8u * (size_t)h->nargs + (size_t)h->len != n)
		return -1;
	if (h->nargs)
		memcpy(args, buf + sizeof(*h), 8u * h->nargs);
	*payload = buf + sizeof(*h) + 8u * h->nargs;
	return 0;
}

/* An RMA range [off, off + len) inside a region of region_len bytes (no wrap-around). */
static inline int paw_range_ok(uint64_t off, uint64_t len, uint64_t region_len)
{
	return off <= region_len && len <= region_len - off;
}

#endif /* PN_AM_WIRE_H */
