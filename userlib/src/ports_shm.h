/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The ports layer's intra-node path (ports_shm.c): shared-memory rings between the
 * ports of one node, private to libparanic. The ports layer decides per peer which path
 * it takes (ports_peer.c) and sends and receives the packets of shm peers through these
 * rings instead of the NIC (ports_send.c, ports_recv.c); the format is in ports_wire.h,
 * the story in docs/ports.md ("Intra-node path").
 */
#ifndef PN_PORTS_SHM_H
#define PN_PORTS_SHM_H

#include <stddef.h>
#include <stdint.h>

#include "paranic/pn_hal.h"

/* Internal to libparanic: no PLT indirection, not exported. */
#pragma GCC visibility push(hidden)

struct pn_shm;        /* one port's side: its inbox and the rings it reads */
struct pn_shm_link;   /* one same-node peer as a sender sees it: its inbox, our ring to it */

/* Create the port's inbox (enabled 0: an inbox saying "NIC only", so that peers do not
 * wait for one). -errno when the segment cannot be made (the port then uses the NIC). */
int pn_shm_open(struct pn_shm **out, const char *cluster, unsigned node, unsigned ctx, unsigned nctx,
		uint32_t epoch, int enabled);
/* Unmap everything, remove the inbox and the rings announced to us that we never mapped. */
void pn_shm_close(struct pn_shm *s);
int pn_shm_enabled(const struct pn_shm *s);

/* Look up the inbox of context `ctx` of our node: 1 it takes shared memory (*out: a new
 * link, no ring yet), 0 it wants the NIC, -EAGAIN no live port there (yet), -errno. */
int pn_shm_link_open(struct pn_shm *s, unsigned ctx, struct pn_shm_link **out);
/* Drop a link (its ring's name is removed unless `keep` and the receiver, alive, has
 * not mapped it yet: records it still has to read). NULL is fine. */
void pn_shm_link_close(struct pn_shm *s, struct pn_shm_link *l, int keep);
/* The peer port's epoch (its inbox says it). */
uint32_t pn_shm_link_epoch(const struct pn_shm_link *l);
/* 1 while the process that owns the peer's inbox lives, 0 when it is gone. */
int pn_shm_link_alive(const struct pn_shm_link *l);

/* ---- sending: reserve records, fill them, publish them together ------------------------- */

/* Mark where a group of records starts (for pn_shm_rollback). Creates and announces the
 * ring on first use: -errno when that fails. */
int pn_shm_begin(struct pn_shm *s, struct pn_shm_link *l);
/* Space for one record of len (<= PW_SHM_REC_MAX) payload bytes: its payload pointer,
 * NULL when the ring is full. */
void *pn_shm_put(struct pn_shm_link *l, uint64_t tag, uint32_t len, uint16_t flags);
/* Forget the records put since pn_shm_begin (nothing was published). */
void pn_shm_rollback(struct pn_shm_link *l);
/* Make the records put since pn_shm_begin visible to the receiver. */
void pn_shm_publish(struct pn_shm_link *l);
/* 1 when a record of len payload bytes fits. */
int pn_shm_room(struct pn_shm_link *l, uint32_t len);
/* Bytes the receiver has not consumed yet. */
uint64_t pn_shm_backlog(const struct pn_shm_link *l);

/* ---- receiving ------------------------------------------------------------------------- */

/* The receive side's state that every progress round tests (the first member of struct
 * pn_shm, so that the test is inline in pt_progress_round, ports_recv.c: three loads,
 * no call). */
struct pn_shm_rxq {
	const uint64_t *change;   /* the inbox's change counter (senders bump it to announce a ring) */
	uint64_t seen;            /* its value when the rings were last looked up */
	unsigned nactive;         /* rings mapped */
	int rescan;               /* an announced ring waits until the old one is read to its end */
};

/* 1 when pn_shm_next can find nothing: no ring mapped, none announced since the last
 * look. s must not be NULL. */
static inline int pn_shm_idle(const struct pn_shm *s)
{
	const struct pn_shm_rxq *q = (const struct pn_shm_rxq *)(const void *)s;
	return !q->nactive && !q->rescan && __atomic_load_n(q->change, __ATOMIC_ACQUIRE) == q->seen;
}

/* The next record from any ring (round robin over the senders): 1 with the sender's
 * context, the header (src_node/src_ctx from the ring, never from the record) and the
 * payload (valid until pn_shm_release); 0 if none. */
int pn_shm_next(struct pn_shm *s, pn_header_t *hd, const void **payload);
/* Release the record pn_shm_next returned. */
void pn_shm_release(struct pn_shm *s);
/* Records from ctx not yet read (0 also when there is no ring from it). */
int pn_shm_pending(const struct pn_shm *s, unsigned ctx);

#pragma GCC visibility pop

#endif /* PN_PORTS_SHM_H */
