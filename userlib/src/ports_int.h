/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * ports: tagged messages between process endpoints over the HAL (pn_ports.h). This
 * private header holds the layer's design, the structures its files share and the
 * functions they call in each other.
 *
 * Design in brief (docs/ports.md has the whole story):
 *
 * Connections. A port talks to another over a connection per direction: the sender
 * sends CONNECT (its epoch, a connection number), the receiver answers ACCEPT with
 * the eager window it grants. Every packet of the connection carries a 16-bit key made
 * from the sender's epoch and the connection number, so packets of a previous
 * connection or of a previous process on the same context are recognised and dropped
 * (and answered with NACK, which resets the sender's side). CONNECT is repeated until
 * an ACCEPT comes, for at most the timeout (-ECONNREFUSED).
 *
 * Order. Messages (eager ones and RTS) carry a sequence number per connection; the
 * receiver matches them strictly in that order, holding back one that overtook an
 * earlier one (PIO and DMA are separate engines of the NIC). So messages of one
 * sender port to one receiver port are matched in the order they were sent.
 *
 * Eager and rendezvous. A message of at most eager_max bytes for which the sender has
 * credit goes at once: one PIO packet (header + data) when it fits the PIO threshold,
 * else one DMA descriptor from a bounce slot. Otherwise the sender sends RTS (with its
 * request id); the receiver, once a matching receive is posted, answers CTS with the
 * receive's id (rid), and the sender streams the data by DMA with the rid in the tag,
 * from the caller's buffer when registered, else through two bounce buffers; the
 * receiver copies each packet from its RX slot straight into the posted buffer.
 *
 * Credits. A receiver grants each sender `window` bytes of eager credit; a message
 * costs len + PN_PORT_MSG_COST. The receiver counts what it has consumed (handed to a
 * receive) and reports the cumulative count (CREDIT, and in every CTS and PONG) when
 * a quarter of the window has been consumed since the last report. A sender out of
 * credit sends by rendezvous, which needs no credit, so it never waits for credit and
 * a receive posted for a later message is never blocked by earlier unconsumed ones.
 * The receiver drops (and counts) eager messages beyond the window: the memory one
 * sender can make a receiver hold is bounded by the window.
 *
 * Liveness. While an operation depends on a peer (a send waiting for CTS, a receive
 * waiting for rendezvous data or for the rest of an eager message) and nothing has
 * been heard from it for a quarter of the timeout, the port sends PING; a live port
 * answers PONG from any library call. No answer within the timeout: the operations
 * end with -ETIMEDOUT and the connection is dropped. A closing port sends CLOSE.
 *
 * Intra-node path. A peer on our node (another context) is reached through shared-memory
 * rings (ports_shm.c) when both ports take it (PARANIC_PORT_SHM): the same packets, the
 * same protocol, another transport; the source of a ring's packets is the ring's owner.
 *
 * Non-blocking inside: the progress engine never waits in the HAL. It sends a PIO
 * packet only when the window is free, posts a descriptor only when the TX ring has
 * room, and leaves what cannot go yet for the next call.
 *
 * Files, one concern each:
 *   ports_api.c    the public API: open, close, sends, receives, requests, information
 *   ports_recv.c   the progress engine and the receive path (the NIC's hot path)
 *   ports_match.c  receive side: connection order, posted and unexpected queues, credit
 *   ports_send.c   send side: eager, rendezvous (RTS, then the data streamed), resets
 *   ports_peer.c   peers, their connections, the way to them, control packets
 *   ports_live.c   liveness: CONNECT retries, PING, timeouts, dead same-node peers
 *   ports_ids.c    the id tables that name requests on the wire
 *   ports_shm.c    the intra-node path's rings (ports_shm.h)
 * A function one file calls in another is named pt_* (global in the library, hidden);
 * the small helpers here are static inline, inlined where they are used.
 */
#ifndef PN_PORTS_INT_H
#define PN_PORTS_INT_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "hal_backend.h"
#include "paranic/pn_coll_spec.h"
#include "paranic/pn_ports.h"
#include "ports_shm.h"
#include "ports_wire.h"

#define HDR ((uint32_t)sizeof(struct pw_msg))
#define EAGER_SLOTS 8
#define CONNECT_RETRY_MIN_NS 1000000ull
#define CONNECT_RETRY_MAX_NS 50000000ull

/* ---- structures ------------------------------------------------------------------------- */

enum rq_type { RQ_SEND = 1, RQ_RECV = 2 };
enum rq_state {
	RQ_QUEUED,   /* send: waiting for its connection or earlier sends */
	RQ_RTS,      /* send: RTS sent, waiting for CTS */
	RQ_STREAM,   /* send: streaming the data */
	RQ_DRAIN,    /* send: all data posted in place, waiting for the DMA to finish */
	RQ_POSTED,   /* recv: posted, not matched */
	RQ_MATCHED,  /* recv: matched an eager message still arriving */
	RQ_RNDV,     /* recv: matched an RTS, data arriving */
	RQ_DONE,
};

struct peer;
struct rqlist {
	struct pn_port_req *head, *tail;
};

struct pn_port_req {
	struct pn_port_req *next, *prev;
	struct rqlist *list;
	uint8_t type, state, on_stack, registered;
	uint8_t trunc;              /* recv: PN_PORT_TRUNC (take a longer message, cut) */
	struct peer *peer;
	/* send */
	uint16_t channel;
	uint16_t mflags;            /* send: pw_msg.flags (PW_MSG_DATA) */
	uint32_t imm;               /* send: the immediate data */
	uint64_t tag;
	const uint8_t *sbuf;
	size_t len, off;
	uint32_t sid, rid, ticket;
	uint16_t key;
	/* recv */
	int m_node, m_ctx, m_chan;
	uint64_t m_tag, m_mask;
	uint8_t *rbuf;
	size_t cap, got;
	pn_port_status_t st;
};

/* An incoming message: eager (data in its own buffer or placed in a receive) or RTS. */
struct imsg {
	struct imsg *next, *prev;   /* unexpected queue (port) or held list (peer, by seq) */
	int where;                  /* 0 none, 1 unexpected queue, 2 held */
	struct peer *peer;
	uint8_t kind, complete, direct, discard, delivered;
	uint16_t channel;
	uint16_t mflags;            /* pw_msg.flags */
	uint32_t imm;               /* pw_msg.data */
	uint64_t tag;
	uint32_t len, seq, sreq, got, conn;
	uint64_t cost;
	uint8_t *data;              /* own buffer (malloc) */
	struct pn_port_req *req;    /* the receive it goes to */
};

struct cts {
	struct cts *next;
	struct peer *peer;
	uint32_t sreq, rid, conn;
};

enum { TX_NONE, TX_CONNECTING, TX_OPEN };
/* How packets to a peer go: the NIC, or (a port of our node, both taking it) shared
 * memory; a same-node peer whose port we have not found yet is undecided. */
enum { PATH_UNKNOWN, PATH_NIC, PATH_SHM };
enum {
	CTL_CONNECT = 1u << 0,
	CTL_ACCEPT = 1u << 1,
	CTL_CREDIT = 1u << 2,
	CTL_PING1 = 1u << 3,   /* we (the sender of the connection us -> peer) ask the peer */
	CTL_PING2 = 1u << 4,   /* we (the receiver of the connection peer -> us) ask the peer */
	CTL_PONG1 = 1u << 5,   /* answer to the peer's PING1 (we are its receiver) */
	CTL_PONG2 = 1u << 6,   /* answer to the peer's PING2 (we are its sender) */
	CTL_NACK1 = 1u << 7,   /* the peer's sender-side packets (key nack1_key) are unknown here */
	CTL_NACK2 = 1u << 8,   /* the peer's receiver-side packets (key nack2_key) are unknown here */
};

struct peer {
	struct peer *all_next;
	struct peer *ctl_next;
	struct peer *send_next;
	uint8_t in_ctl, in_send;
	uint32_t ctl;
	uint16_t node;
	uint8_t ctx;
	/* connection us -> peer (we send) */
	uint8_t tx_state;
	uint32_t tx_conn;
	uint16_t tx_key;
	uint32_t tx_remote_epoch;
	uint32_t tx_seq;
	uint64_t tx_window, tx_sent_cost, tx_consumed;
	uint64_t connect_t0, connect_last, connect_wait;
	struct rqlist sendq;
	uint32_t n_rts;
	/* connection peer -> us (we receive) */
	uint8_t rx_known;
	uint32_t rx_epoch, rx_conn;
	uint16_t rx_key;
	uint32_t rx_seq;
	struct imsg *held;
	struct imsg *eager_active;
	uint64_t rx_arrived, rx_consumed, rx_reported;
	uint32_t n_rndv;
	/* liveness */
	uint64_t last_heard, ping_sent, ping_last;
	uint16_t nack1_key, nack2_key;
	uint32_t pong1_conn, pong2_conn;
	/* the intra-node path */
	uint8_t path;                  /* PATH_* (both directions of the pair use it) */
	struct pn_shm_link *shm;       /* PATH_SHM: the peer's inbox and our ring to it */
};

struct idtab {
	void **ptr;
	uint16_t *gen;
	uint32_t *free;
	uint32_t cap, nfree;
};
#define ID_IDX_BITS 20
#define ID_IDX_MASK ((1u << ID_IDX_BITS) - 1)

struct pn_port {
	pn_hal_t *h;
	uint32_t node, nodes, ctx, nctx, mtu, pio_max;
	uint32_t epoch;
	long eager_max;
	uint64_t window;
	uint64_t timeout_ns, ping_ns;
	uint64_t now;
	int in_progress;
	struct peer ***peers;          /* [node][ctx], allocated on first use */
	struct peer *all_peers;
	struct peer *ctl_peers, **ctl_tail;
	struct peer *send_peers;
	struct cts *cts_head, *cts_tail;
	/* receive side */
	struct imsg *unx_head, *unx_tail;
	struct rqlist posted;
	struct idtab rtab;             /* rid -> rendezvous receive */
	/* send side */
	struct idtab stab;             /* sreq -> send waiting for CTS */
	struct rqlist streamq, drainq;
	void *bounce[2];
	uint32_t bounce_ticket[2];
	unsigned bounce_next;
	uint8_t *eslot;                /* EAGER_SLOTS slots of eslot_bytes (DMA-able) */
	size_t eslot_bytes;
	uint32_t eslot_ticket[EAGER_SLOTS];
	unsigned eslot_next;
	uint64_t last_live;
	uint8_t pio_buf[PN_PIO_WINDOW_BYTES];
	struct pn_shm *shm;            /* the intra-node path (NULL: none) */
	int shm_on;                    /* it is enabled and the inbox exists */
	pn_port_stats_t st;
	/* the collectives (coll.c: the software path; coll_unit.c: the NIC's unit) */
	uint16_t coll_ep;              /* the next operation's episode (every node counts the same) */
	uint16_t coll_dirty;           /* operations left to drain stale messages of failed ones */
	uint64_t coll_tmo_ns;          /* silence allowed per wait ($PARANIC_COLL_TIMEOUT_MS; 0: not read yet) */
	int coll_mode;                 /* PT_COLL_*: which path the calls take */
	int coll_a2a_max;              /* ALLREDUCE all-to-all on the unit up to this many nodes ($PARANIC_COLL_A2A_MAX) */
	int coll_a2a_read;             /* coll_a2a_max has been read */
	int coll_res_valid;            /* a result packet of the unit is in coll_res_* */
	uint64_t coll_res_hdr;
	size_t coll_res_bytes;
	uint64_t coll_res[PN_COLL_MAX_WORDS];
	/* the operation pn_coll_start started on the unit (pn_coll_test ends it) */
	int coll_busy;
	uint64_t coll_cmd_hdr, coll_deadline;
	size_t coll_nbytes;
};

/* The collectives' path (pn_port_t.coll_mode), chosen at the first call from
 * $PARANIC_COLL: "auto" (default: the unit when this context has one, else software),
 * "hw" (the unit or -ENODEV), "sw" (software over ports). */
enum { PT_COLL_UNKNOWN = 0, PT_COLL_AUTO, PT_COLL_HW, PT_COLL_SW, PT_COLL_BROKEN };

/* ---- small helpers ------------------------------------------------------------------------ */

static inline uint32_t sts(const pn_hal_t *h, unsigned word)
{
	return __atomic_load_n(&h->map.status[word], __ATOMIC_ACQUIRE);
}

static inline int pio_free(const pn_hal_t *h)
{
	return (int32_t)(sts(h, PN_STS_PIO_DONE_WORD) - h->pio_posted) >= 0;
}

static inline int tx_room(const pn_hal_t *h)
{
	return h->tx_tail - sts(h, PN_STS_TX_DONE_WORD) < h->map.tx_entries;
}

static inline int tx_reached(const pn_hal_t *h, uint32_t ticket)
{
	return (int32_t)(sts(h, PN_STS_TX_DONE_WORD) - ticket) >= 0;
}

static inline uint64_t msg_cost(size_t len)
{
	return (uint64_t)len + PN_PORT_MSG_COST;
}

static inline void rq_append(struct rqlist *l, struct pn_port_req *r)
{
	r->list = l;
	r->next = NULL;
	r->prev = l->tail;
	if (l->tail)
		l->tail->next = r;
	else
		l->head = r;
	l->tail = r;
}

static inline void rq_unlink(struct pn_port_req *r)
{
	struct rqlist *l = r->list;
	if (!l)
		return;
	if (r->prev)
		r->prev->next = r->next;
	else
		l->head = r->next;
	if (r->next)
		r->next->prev = r->prev;
	else
		l->tail = r->prev;
	r->next = r->prev = NULL;
	r->list = NULL;
}

/* ---- id tables (ports_ids.c) -------------------------------------------------------------- */

static inline void *id_get(const struct idtab *t, uint32_t id)
{
	uint32_t i = id & ID_IDX_MASK;
	if (i >= t->cap || !t->ptr[i] || t->gen[i] != (id >> ID_IDX_BITS))
		return NULL;
	return t->ptr[i];
}

/* ---- peers, completion, matching ---------------------------------------------------------- */

/* Used in several files, on the receive path among others: static inline, so that each
 * file inlines them where it uses them. */

static inline void ctl_set(pn_port_t *p, struct peer *pe, uint32_t flags)
{
	pe->ctl |= flags;
	if (!pe->in_ctl) {
		pe->in_ctl = 1;
		pe->ctl_next = NULL;
		*p->ctl_tail = pe;
		p->ctl_tail = &pe->ctl_next;
	}
}

static inline void send_list_add(pn_port_t *p, struct peer *pe)
{
	if (!pe->in_send) {
		pe->in_send = 1;
		pe->send_next = p->send_peers;
		p->send_peers = pe;
	}
}

static inline void req_finish(pn_port_t *p, struct pn_port_req *r, int err)
{
	rq_unlink(r);
	r->state = RQ_DONE;
	r->st.error = err;
	if (r->type == RQ_RECV && !err) {
		p->st.recv_msgs++;
		p->st.recv_bytes += r->st.len;
		if (r->peer && r->peer->path == PATH_SHM) {
			p->st.shm_recv_msgs++;
			p->st.shm_recv_bytes += r->st.len;
		}
	}
}

static inline void fill_status(pn_port_status_t *st, const struct peer *pe, const struct imsg *m)
{
	st->src_node = pe->node;
	st->src_ctx = pe->ctx;
	st->channel = m->channel;
	st->tag = m->tag;
	st->len = m->len;
	st->error = 0;
	st->data = m->imm;
	st->flags = (m->mflags & PW_MSG_DATA) ? PN_PORT_DATA : 0;
}

/* Bytes of n at offset off of a message that receive r's buffer takes: all of them,
 * unless r truncates (PN_PORT_TRUNC) a message longer than its buffer. */
static inline size_t rq_room(const struct pn_port_req *r, size_t off, size_t n)
{
	if (off >= r->cap)
		return 0;
	return n < r->cap - off ? n : r->cap - off;
}

/* How a receive whose message has all arrived ends: -EMSGSIZE when it was truncated. */
static inline int rq_end(const struct pn_port_req *r)
{
	return r->st.len > r->cap ? -EMSGSIZE : 0;
}

static inline int req_matches(const struct pn_port_req *r, const struct peer *pe, uint16_t chan, uint64_t tag)
{
	return (r->m_node < 0 || r->m_node == pe->node) && (r->m_ctx < 0 || r->m_ctx == pe->ctx) &&
	       (r->m_chan < 0 || r->m_chan == chan) && ((tag ^ r->m_tag) & r->m_mask) == 0;
}

static inline void unx_unlink(pn_port_t *p, struct imsg *m)
{
	if (m->where != 1)
		return;
	if (m->prev)
		m->prev->next = m->next;
	else
		p->unx_head = m->next;
	if (m->next)
		m->next->prev = m->prev;
	else
		p->unx_tail = m->prev;
	m->next = m->prev = NULL;
	m->where = 0;
	p->st.unexpected_msgs--;
}

static inline void buf_release(pn_port_t *p, struct imsg *m)
{
	if (m->data) {
		free(m->data);
		m->data = NULL;
		p->st.unexpected_bytes -= m->len;
	}
}

static inline int pio_ready(pn_port_t *p)
{
	if (pio_free(p->h))
		return 1;
	pn_progress(p->h);
	return pio_free(p->h);
}

/* ---- functions shared between the files (global in the library, hidden) ------------------- */

#pragma GCC visibility push(hidden)

/* ports_ids.c */
int pt_id_alloc(struct idtab *t, void *ptr, uint32_t *id);
void pt_id_free(struct idtab *t, uint32_t id);
void pt_id_destroy(struct idtab *t);

/* ports_peer.c */
struct peer *pt_peer_get(pn_port_t *p, unsigned node, unsigned ctx);
void pt_path_resolve(pn_port_t *p, struct peer *pe);
void pt_connect_start(pn_port_t *p, struct peer *pe);
int pt_pkt_ready(pn_port_t *p, struct peer *pe, uint32_t len);
int pt_send_ctl(pn_port_t *p, struct peer *pe, unsigned kind, uint16_t key, const struct pw_ctl *c);
void pt_ctl_init(const pn_port_t *p, struct pw_ctl *c, uint32_t dst_epoch);
int pt_ctl_flush(pn_port_t *p);

/* ports_match.c */
void pt_imsg_free(pn_port_t *p, struct imsg *m);
void pt_consume(pn_port_t *p, struct imsg *m);
struct pn_port_req *pt_find_posted(pn_port_t *p, const struct peer *pe, const struct imsg *m);
void pt_recv_post(pn_port_t *p, struct pn_port_req *r);
void pt_release_held(pn_port_t *p, struct peer *pe);
void pt_arrive(pn_port_t *p, struct peer *pe, struct imsg *m);
void pt_eager_complete(pn_port_t *p, struct imsg *m);
void pt_rx_reset(pn_port_t *p, struct peer *pe, int err);

/* ports_send.c */
void pt_tx_reset(pn_port_t *p, struct peer *pe, int err, int queued_too);
void pt_send_enqueue(pn_port_t *p, struct peer *pe, struct pn_port_req *r);
int pt_send_pump(pn_port_t *p);
int pt_stream_pump(pn_port_t *p);
int pt_drain_check(pn_port_t *p);

/* ports_live.c */
void pt_live_check(pn_port_t *p);

/* coll_unit.c: a result packet of the collective unit (from the receive loop). */
void pt_coll_result(pn_port_t *p, const pn_header_t *hd, const void *pl);


/* ports_recv.c: one progress round (call progress(), below) */
int pt_progress_round(pn_port_t *p);

#pragma GCC visibility pop

/* Run a progress round unless one is running already (the HAL's wait hook runs rounds
 * too: never one inside another). Returns what the round did (packets, sends). */
static inline int progress(pn_port_t *p)
{
	if (p->in_progress)
		return 0;
	return pt_progress_round(p);
}

#endif /* PN_PORTS_INT_H */
