/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * paranicd's wire formats (docs/paranicd.md), shared by the daemon
 * (userlib/daemon/paranicd.c) and its client in libparanic (src/daemon.c).
 *
 * 1. The UNIX socket (SOCK_STREAM, one request and one reply at a time): every message
 *    is a struct pnd_frame followed by `len` payload bytes.
 *      request             payload                       reply payload
 *      ATTACH              struct pnd_attach             -
 *      DETACH              -                             - (no reply: the client closes)
 *      STATUS              -                             pn_daemon_info_t, count x pn_daemon_node_t
 *      PROCS               -                             count x pn_daemon_proc_t
 *      JOBS                -                             count x pn_daemon_job_t
 *      JOB_START           pn_daemon_job_t               -
 *      JOB_END             char id[PN_DAEMON_NAME_MAX]   -
 *    A reply has the request's type, status 0 or -errno, `count` records and, when
 *    refused, the reason (NUL-terminated) as its payload instead.
 *    The daemon learns the peer's pid/uid/gid with SO_PEERCRED, never from the payload.
 *    An ATTACH connection stays open for the life of the context: closing it without
 *    DETACH means the process died (crash clean-up).
 *
 * 2. Over the NIC, DATA packets from the daemon's context (PN_DAEMON_CTX), one PIO
 *    packet each (SOM|EOM); the sending NIC stamps src_node/src_ctx, which is what
 *    receivers believe:
 *      HELLO      tag PND_TAG_HELLO, struct pnd_hello, to the other daemons'
 *                 contexts, at start and every hello period;
 *      PEER-DEAD  a ports packet (ports_wire.h: PW_PEER_DEAD, struct pw_dead) to
 *                 every other context of every node.
 */
#ifndef PN_DAEMON_PROTO_H
#define PN_DAEMON_PROTO_H

#include <stddef.h>
#include <stdint.h>

#include "paranic/pn_daemon.h"

#define PND_MAGIC 0x444e5050u       /* "PPND" */
#define PND_PROTO_VERSION 1u
#define PND_MAX_PAYLOAD (1u << 20)

enum pnd_type {
	PND_ATTACH = 1,
	PND_DETACH = 2,
	PND_STATUS = 3,
	PND_PROCS = 4,
	PND_JOBS = 5,
	PND_JOB_START = 6,
	PND_JOB_END = 7,
};

struct pnd_frame {
	uint32_t magic;      /* PND_MAGIC */
	uint16_t type;       /* enum pnd_type */
	uint16_t version;    /* PND_PROTO_VERSION */
	int32_t status;      /* replies: 0 or -errno */
	uint32_t count;      /* replies: records that follow */
	uint32_t len;        /* payload bytes */
	uint32_t rsvd;
};

struct pnd_attach {
	uint32_t abi;        /* the client library's PN_ABI_VERSION */
	int32_t node;        /* the context it opened */
	int32_t ctx;
	uint32_t rsvd;
	char job[PN_DAEMON_NAME_MAX];   /* $PARANIC_JOB */
};

/* Over the NIC. Tag: bits 63..60 0xD (a daemon packet), 59..56 the kind. */
#define PND_TAG_HELLO 0xD100000000000000ull
#define PND_HELLO_MAGIC 0x4f4c4548u   /* "HELO" */

struct pnd_hello {
	uint32_t magic;      /* PND_HELLO_MAGIC */
	uint32_t pid;        /* the daemon's pid */
	uint32_t addr;       /* the node's cluster IPv4 address (host order) */
	uint32_t abi;        /* PN_ABI_VERSION */
	uint64_t seq;        /* hellos sent by this daemon so far */
	char host[PN_DAEMON_NAME_MAX];
};

/* ---- parsing (daemon_proto.c; fuzzed by tests/fuzz/fuzz_daemon.c) -------------------------
 * Pure functions on the bytes that came from the other side. */

/* The daemon: the request frame at the start of buf (len bytes received so far; the
 * connection buffers at most cap). >0: the bytes the whole frame takes (*f its header,
 * *payload its f->len payload bytes); 0: not complete yet; -EPROTO: not this protocol or
 * larger than cap (drop the connection). */
long pnd_take_request(const void *buf, size_t len, size_t cap, struct pnd_frame *f, const void **payload);
/* The payload of a complete request fits its type (ATTACH, JOB_START: their structure;
 * JOB_END: a NUL-terminated id; the others: anything): 0, or -EPROTO (refuse it).
 * -ENOSYS: an unknown type. */
int pnd_check_request(const struct pnd_frame *f, const void *payload);
/* The client: the reply frame to a request of `type`: 0 or -EPROTO. */
int pnd_check_reply(const struct pnd_frame *f, uint16_t type);
/* A successful reply's payload is a head of `head` bytes and f->count records of `rec`
 * bytes, nothing more: 0 or -EPROTO. */
int pnd_check_records(const struct pnd_frame *f, size_t head, size_t rec);
/* NUL-terminate every string of a reply's records (n bytes at buf: what was kept of a
 * reply to `type` with `count` records), so that a caller may print them. */
void pnd_terminate_reply(uint16_t type, void *buf, size_t n, uint32_t count);

struct pn_header;
/* A HELLO over the NIC (header, payload in place): 0 and *out (host NUL-terminated) when it
 * is one from another node's daemon context (daemon_ctx) of a cluster of `nodes`, else -1. */
int pnd_parse_hello(const struct pn_header *hd, const void *pl, int nodes, int daemon_ctx, struct pnd_hello *out);

_Static_assert(sizeof(struct pnd_frame) == 24, "pnd_frame layout");
_Static_assert(sizeof(struct pnd_attach) == 80, "pnd_attach layout");
_Static_assert(sizeof(struct pnd_hello) == 88, "pnd_hello layout");

#endif /* PN_DAEMON_PROTO_H */
