/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The firmware's control packets (PacketType CONTROL), docs/firmware.md "Messages".
 *
 * Header word 1 (the tag) holds FW_MSG_MAGIC in bits 63..32 and the kind in bits 15..0.
 * Payloads are little-endian 64-bit words, packed and unpacked field by field (no
 * struct layout crosses the wire).
 *
 *   HELLO (link-local, direct = the port it leaves on): who is at this end.
 *     w0 uid; w1 cfg (bits 15..0) | port (23..16) | nports (31..24)
 *   LSA (link-local, flooded): one node's view of its links, newest seq wins.
 *     w0 uid; w1 seq (31..0) | cfg (47..32) | nports (55..48)
 *     per port p = 1..4, two words: nbr_uid; nbr_port (7..0) | state (15..8) |
 *     downs (31..16) | rx_expect (47..32);
 *     w10 gen (31..0: the route plan in use) | armed (63..32: the plan loaded beside it);
 *     w11 plan (31..0: the newest route plan this node published as leader, 0: none);
 *     w12..w15, only when plan is not 0 (the LSA is 12 words otherwise): that plan's failed
 *     links by node id, 4 bits per node (node i: word 12 + i/16, bits 4*(i%16)..+3;
 *     bit p-1: link port p out of service)
 *   FLUSH (routed, stamped with the sender's old table set): w0 plan. Sent by a node about
 *     to switch to `plan` to every node it reaches; behind every packet it sent before.
 *   FLUSH_ACK (routed): w0 plan. The answer: everything before the FLUSH has arrived.
 */
#ifndef PN_FW_MSG_H
#define PN_FW_MSG_H

#include <stdint.h>

#define FW_MSG_MAGIC 0x504e4657u   /* "PNFW" */
enum fw_msg_kind { FW_MSG_HELLO = 1, FW_MSG_LSA = 2, FW_MSG_FLUSH = 3, FW_MSG_FLUSH_ACK = 4 };

#define FW_HELLO_WORDS 2
#define FW_LSA_WORDS 16        /* with a published plan's failed links */
#define FW_LSA_MIN_WORDS 12    /* without (plan 0: every node but the leader) */
#define FW_FLUSH_WORDS 1
/* Nodes a plan's failed-link set covers (4 words of 16 nodes). */
#define FW_PLAN_NODES 64

/* State of a link port in an LSA. */
enum fw_port_state {
	FW_PORT_UNUSED = 0,      /* nothing known at the other end */
	FW_PORT_UP = 1,          /* in service: carries routes */
	FW_PORT_DOWN = 2,        /* went down; rx_expect is its receive count */
	FW_PORT_RECOVERING = 3,  /* restarted: training, or up on probation */
};

struct fw_lsa_port {
	uint64_t nbr_uid;
	uint8_t nbr_port, state;
	uint16_t downs, rx_expect;
};

struct fw_lsa {
	uint64_t uid;
	uint32_t seq;
	uint16_t cfg;
	uint8_t nports;
	struct fw_lsa_port port[5];   /* [1..4] */
	uint32_t gen, armed, plan;
	uint64_t plan_down[FW_PLAN_NODES / 16];   /* as on the wire: 4 bits per node */
};

/* Link ports of `node` out of service in a plan's failed-link set. */
static inline uint8_t fw_plan_down(const uint64_t *pd, unsigned int node)
{
	return node < FW_PLAN_NODES ? (uint8_t)((pd[node / 16] >> (4 * (node % 16))) & 15) : 0;
}

static inline uint64_t fw_msg_tag(enum fw_msg_kind k)
{
	return ((uint64_t)FW_MSG_MAGIC << 32) | (uint64_t)k;
}

/* Returns the words written: FW_LSA_MIN_WORDS, or FW_LSA_WORDS with a plan. */
static inline unsigned int fw_lsa_pack(const struct fw_lsa *l, uint64_t *w)
{
	int p;

	w[0] = l->uid;
	w[1] = l->seq | ((uint64_t)l->cfg << 32) | ((uint64_t)l->nports << 48);
	for (p = 1; p <= 4; p++) {
		const struct fw_lsa_port *q = &l->port[p];

		w[2 * p] = q->nbr_uid;
		w[2 * p + 1] = q->nbr_port | ((uint64_t)q->state << 8) | ((uint64_t)q->downs << 16) |
			       ((uint64_t)q->rx_expect << 32);
	}
	w[10] = l->gen | ((uint64_t)l->armed << 32);
	w[11] = l->plan;
	if (!l->plan)
		return FW_LSA_MIN_WORDS;
	for (p = 0; p < FW_PLAN_NODES / 16; p++)
		w[12 + p] = l->plan_down[p];
	return FW_LSA_WORDS;
}

/* `n`: the words received (FW_LSA_MIN_WORDS or more). */
static inline void fw_lsa_unpack(struct fw_lsa *l, const uint64_t *w, unsigned int n)
{
	int p;

	l->uid = w[0];
	l->seq = (uint32_t)w[1];
	l->cfg = (uint16_t)(w[1] >> 32);
	l->nports = (uint8_t)(w[1] >> 48);
	l->port[0] = (struct fw_lsa_port){0, 0, 0, 0, 0};
	for (p = 1; p <= 4; p++) {
		struct fw_lsa_port *q = &l->port[p];

		q->nbr_uid = w[2 * p];
		q->nbr_port = (uint8_t)w[2 * p + 1];
		q->state = (uint8_t)(w[2 * p + 1] >> 8);
		q->downs = (uint16_t)(w[2 * p + 1] >> 16);
		q->rx_expect = (uint16_t)(w[2 * p + 1] >> 32);
	}
	l->gen = (uint32_t)w[10];
	l->armed = (uint32_t)(w[10] >> 32);
	l->plan = (uint32_t)w[11];
	for (p = 0; p < FW_PLAN_NODES / 16; p++)
		l->plan_down[p] = l->plan && n >= FW_LSA_WORDS ? w[12 + p] : 0;
}

#endif /* PN_FW_MSG_H */
