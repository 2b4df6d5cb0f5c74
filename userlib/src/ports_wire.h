/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The ports layer's wire format (docs/ports.md), private to libparanic (and read by
 * userlib/tests/ports_test.c, which forges packets with it).
 *
 * Every packet is a DATA packet between two port contexts. Its 64-bit tag:
 *
 *   bits 63..60  0xA: a ports packet          bits 59..56  kind (PW_*)
 *   bits 55..40  the connection's key (pw_conn_key: the sending port's epoch and the
 *                connection number): every packet of connection A -> B carries A's key
 *                for it, whichever way it goes (EAGER, RTS, RDATA, CONNECT, PING from A;
 *                ACCEPT, CTS, CREDIT, PONG from B); CLOSE and NACK carry 0
 *   bits 31..0   EAGER: the message's sequence number on its connection;
 *                RDATA: the rid of the receive (from the CTS); else 0
 *
 * EAGER: the first packet's payload starts with struct pw_msg (then the data); the
 * others carry data only (the packets of one DMA descriptor, in order).
 * RTS: struct pw_rts.   PEER_DEAD: struct pw_dead.   All other kinds: struct pw_ctl.
 * RDATA: data only, appended in arrival order to the receive the rid names.
 */
#ifndef PN_PORTS_WIRE_H
#define PN_PORTS_WIRE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "paranic/pn_hal.h"
#include "paranic/pn_ports.h"

#define PW_MAGIC 0xAull

enum pw_kind {
	PW_EAGER = 1,    /* a message's data (its first packet starts with pw_msg) */
	PW_RTS = 2,      /* request to send (pw_rts; sequence number in the tag) */
	PW_CTS = 3,      /* clear to send (pw_ctl: a = the sender's request id, b = rid; credit) */
	PW_RDATA = 4,    /* rendezvous data (tag: rid) */
	PW_CONNECT = 5,  /* open the connection sender -> receiver (pw_ctl: conn = its number) */
	PW_ACCEPT = 6,   /* answer to CONNECT (pw_ctl: a = the eager window granted, conn) */
	PW_CREDIT = 7,   /* credit return (pw_ctl: credit, conn) */
	PW_PING = 8,     /* are you there? (pw_ctl) */
	PW_PONG = 9,     /* yes (pw_ctl; carries credit, conn like CREDIT) */
	PW_CLOSE = 10,   /* this port closes (pw_ctl) */
	PW_NACK = 11,    /* no connection of yours here (pw_ctl: dst_epoch's low 16 bits are yours) */
	PW_PEER_DEAD = 12, /* from a node's paranicd (its context PN_DAEMON_CTX): the process on
			    * (node, ctx) died (struct pw_dead; tag key and low bits 0) */
};

/* Payload of PW_PEER_DEAD. Believed only when the NIC-stamped source is (node,
 * PN_DAEMON_CTX): a node's daemon speaks for its own node only. */
struct pw_dead {
	uint32_t node;
	uint32_t ctx;
	uint32_t pid;         /* the dead process (information) */
	uint32_t rsvd;        /* 0 */
};

#define PW_TAG(kind, epoch16, low32) \
	((PW_MAGIC << 60) | ((uint64_t)(kind) << 56) | ((uint64_t)(uint16_t)(epoch16) << 40) | \
	 (uint64_t)(uint32_t)(low32))
#define PW_TAG_MAGIC(t) ((t) >> 60)
#define PW_TAG_KIND(t) ((unsigned)(((t) >> 56) & 0xf))
#define PW_TAG_EPOCH(t) ((uint16_t)((t) >> 40))
#define PW_TAG_LOW(t) ((uint32_t)(t))

/* Header of an eager message, in front of its data in the first packet (24 bytes). */
struct pw_msg {
	uint64_t tag;      /* the user's tag */
	uint32_t len;      /* message length */
	uint16_t channel;
	uint16_t flags;    /* PW_MSG_DATA or 0 */
	uint32_t data;     /* 32 bits of immediate data (pn_port_isendx), valid with PW_MSG_DATA */
	uint32_t rsvd;     /* 0 */
};
#define PW_MSG_DATA 0x1u   /* pw_msg.flags: the message carries `data` */

/* Payload of an RTS (32 bytes). */
struct pw_rts {
	struct pw_msg m;
	uint32_t sreq;     /* the sender's request id (comes back in the CTS) */
	uint32_t rsvd;     /* 0 */
};

/* Payload of the control kinds. */
struct pw_ctl {
	uint32_t src_epoch;   /* the sender's epoch */
	uint32_t dst_epoch;   /* the epoch the sender addresses (its peer's, as it knows it) */
	uint32_t a, b;        /* kind-specific (see enum pw_kind) */
	uint64_t credit;      /* eager bytes of the addressee's messages the sender has consumed
			       * on connection `conn` (cumulative; 0: no information) */
	uint32_t conn;        /* the connection (the number the sender of CONNECT gave it) */
	uint32_t rsvd;        /* 0 */
};

/* The 16-bit key of a connection (tag bits 55..40): made from the sending port's epoch
 * and the connection's number; never 0. */
static inline uint16_t pw_conn_key(uint32_t epoch, uint32_t conn)
{
	uint32_t x = epoch ^ (conn * 0x9e3779b1u);
	x ^= x >> 16;
	x *= 0x85ebca6bu;
	x ^= x >> 13;
	return (uint16_t)((x ^ (x >> 16)) | 1);
}

/* ---- parsing a received packet (tests/fuzz/fuzz_ports.c fuzzes these) ----------------------
 * Each takes the header as the HAL (or a ring) gave it and the payload in place (hd->length
 * bytes at pl, pl NULL when there are none) and reads nothing beyond it. */

/* The pw_msg at the head of an EAGER message's first packet: 0 and *m, or -1 (shorter
 * than pw_msg, a length beyond PN_PORT_EAGER_LIMIT, or more data than the message). */
static inline int pw_parse_msg(const pn_header_t *hd, const void *pl, struct pw_msg *m)
{
	if (hd->length < sizeof(*m) || !pl)
		return -1;
	memcpy(m, pl, sizeof(*m));
	if (m->len > PN_PORT_EAGER_LIMIT || hd->length - (uint32_t)sizeof(*m) > m->len)
		return -1;
	return 0;
}

/* A payload of exactly `want` bytes in one packet (SOM and EOM): pw_rts, pw_ctl, pw_dead.
 * 0 and *out, or -1. */
static inline int pw_parse_fixed(const pn_header_t *hd, const void *pl, void *out, size_t want)
{
	if (hd->length != want || !pl || !(hd->flags & PN_FLAG_SOM) || !(hd->flags & PN_FLAG_EOM))
		return -1;
	memcpy(out, pl, want);
	return 0;
}

/* ---- the intra-node path (ports_shm.c, docs/ports.md "Intra-node path") ----------------
 *
 * Two ports of one node (same node id, other contexts) exchange the same packets as
 * above (tag, flags, payload) through shared memory instead of the NIC. Per receiver
 * port an *inbox* segment, created by the receiver at open:
 *     /paranic-<cluster>:n<node>:c<ctx>
 * per sender -> receiver a *ring* segment, created by the sender (one per connection
 * incarnation `inc`, announced in the receiver's inbox):
 *     /paranic-<cluster>:n<node>:c<src>-c<dst>:<inc, 16 hex digits>
 * The ring is single-producer (the sender) single-consumer (the receiver): records of
 * struct pw_shm_rec + payload, each PW_SHM_ALIGN-aligned, never split at the ring's end
 * (a PW_SHM_WRAP record says "continue at offset 0"). The receiver takes the source
 * (node, context) from the ring it read, never from a record.
 */
#define PW_SHM_VERSION 1
#define PW_SHM_INBOX_MAGIC 0x58424e4950534e50ull   /* "PNSPINBX" */
#define PW_SHM_RING_MAGIC 0x474e52504d48534eull    /* "NSHMPRNG" */
#define PW_SHM_ALIGN 64u
#define PW_SHM_REC_MAX (64u * 1024u)        /* payload bytes per record (a "packet") */
#define PW_SHM_RING_BYTES (1u << 20)         /* data bytes of a ring (power of two) */
#define PW_SHM_HDR_BYTES 4096u               /* ring segment: header page, then the data */

enum pw_shm_kind {
	PW_SHM_PKT = 1,    /* a packet: tag, flags, payload as on the NIC */
	PW_SHM_WRAP = 2,   /* padding up to the ring's end */
};

struct pw_shm_rec {
	uint64_t tag;      /* the packet's tag (PW_TAG) */
	uint32_t len;      /* payload bytes that follow */
	uint16_t flags;    /* PN_FLAG_SOM / PN_FLAG_EOM as the NIC would set them */
	uint16_t kind;     /* enum pw_shm_kind */
};

/* The receiver's inbox: who it is, and the rings announced to it. */
struct pw_shm_inbox {
	uint64_t magic;                /* written last, after the rest */
	uint32_t version, node, ctx, nctx;
	uint32_t owner_pid;            /* the receiving process (liveness) */
	uint32_t epoch;                /* its port's epoch */
	uint32_t enabled;              /* 0: this port takes no shared memory (PARANIC_PORT_SHM=0) */
	uint32_t rsvd;
	_Alignas(64) uint64_t change;  /* bumped by a sender after it set inc[] */
	_Alignas(64) uint64_t inc[64]; /* per sender context: its current ring's incarnation (0: none) */
};

/* The header page of a ring segment. */
struct pw_shm_ring {
	uint64_t magic;
	uint32_t version, node, src_ctx, dst_ctx;
	uint32_t owner_pid;            /* the sending process */
	uint32_t epoch;                /* its port's epoch */
	uint64_t inc;                  /* (epoch << 32) | number of the ring */
	uint64_t size;                 /* data bytes (power of two) */
	uint32_t rx_mapped;            /* set by the receiver once it has mapped the ring */
	uint32_t rsvd;
	_Alignas(64) uint64_t head;    /* bytes written (producer; published with release) */
	_Alignas(64) uint64_t tail;    /* bytes consumed (consumer) */
};

_Static_assert(sizeof(struct pw_shm_rec) == 16, "pw_shm_rec is 16 bytes");

/* Bytes a record of `len` payload bytes takes in a ring. */
static inline uint64_t pw_shm_rec_bytes(uint32_t len)
{
	return ((uint64_t)sizeof(struct pw_shm_rec) + len + PW_SHM_ALIGN - 1) & ~(uint64_t)(PW_SHM_ALIGN - 1);
}

/* The record at byte `tail` (the consumer's own count, a multiple of PW_SHM_ALIGN) of a
 * ring's data (`size` bytes, a power of two >= PW_SHM_ALIGN; the producer is another
 * process and may have written anything there). 1: a packet, *rec its
 * header with rec->len clamped so that its payload (right after the header) ends inside
 * the data (and at PW_SHM_REC_MAX); 0: a WRAP (or any other kind): continue at the ring's
 * start. *adv: the bytes the record takes (tail + *adv is the next record). */
static inline int pw_shm_rec_at(const uint8_t *data, uint64_t size, uint64_t tail, struct pw_shm_rec *rec,
				uint64_t *adv)
{
	uint64_t off = tail & (size - 1), room;
	memcpy(rec, data + off, sizeof(*rec));
	if (rec->kind != PW_SHM_PKT) {
		*adv = size - off;
		return 0;
	}
	room = size - off - sizeof(*rec);
	if (rec->len > PW_SHM_REC_MAX)
		rec->len = PW_SHM_REC_MAX;
	if (rec->len > room)   /* a broken record */
		rec->len = (uint32_t)room;
	*adv = pw_shm_rec_bytes(rec->len);
	return 1;
}
_Static_assert(sizeof(struct pw_shm_ring) <= PW_SHM_HDR_BYTES, "ring header fits its page");

_Static_assert(sizeof(struct pw_msg) == 24, "pw_msg is 24 bytes on the wire");
_Static_assert(sizeof(struct pw_rts) == 32, "pw_rts is 32 bytes on the wire");
_Static_assert(sizeof(struct pw_ctl) == 32, "pw_ctl is 32 bytes on the wire");
_Static_assert(sizeof(struct pw_dead) == 16, "pw_dead is 16 bytes on the wire");

#endif /* PN_PORTS_WIRE_H */
