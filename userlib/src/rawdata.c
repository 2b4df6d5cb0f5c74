/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * rawdata: node-addressed messages of any size over the HAL.
 *
 * Wire format: every packet of a message is a DATA packet to the peer's rawdata
 * context whose 64-bit tag carries
 *
 *   bits  0..31  total message length (0 .. PN_RD_MAX_MSG)
 *   bits 32..47  message sequence number, per sender -> receiver (wraps)
 *   bits 48..55  the sender's epoch (random per open: a restarted sender differs)
 *   bits 56..62  0x52 ('R'), marks rawdata packets
 *   bit  63      FIRST: the packet belongs to the message's first chunk
 *
 * A message up to the PIO threshold is one PIO packet (SOM|EOM). A longer one is
 * sent as DMA chunks (up to PN_RD_CHUNK bytes through the bounce ring, or up to
 * PN_MAX_DMA_LENGTH in place when the caller's buffer is registered memory); each
 * chunk is one descriptor, so its packets carry SOM on the first and EOM on the
 * last, and the same tag. The message starts at the packet with FIRST and SOM; the
 * receiver appends payloads in arrival order (one deterministic path per pair, and
 * a sender never interleaves two of its messages: pn_rd_send returns only once the
 * whole message has been posted, the TX engine sends descriptors in order, and a
 * switch between PIO and DMA waits for the other engine to finish) and the message
 * is complete when its
 * length is reached on an EOM packet.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hal_int.h"
#include "paranic/pn_rawdata.h"

#define RD_MAGIC 0x52ull
#define RD_TAG_FIRST (1ull << 63)
#define RD_TAG(len, seq, epoch) \
	((uint64_t)(uint32_t)(len) | ((uint64_t)(uint16_t)(seq) << 32) | ((uint64_t)(uint8_t)(epoch) << 48) | \
	 (RD_MAGIC << 56))
#define RD_TAG_LEN(t) ((uint32_t)(t))
#define RD_TAG_SEQ(t) ((uint16_t)((t) >> 32))
#define RD_TAG_EPOCH(t) ((uint8_t)((t) >> 48))
#define RD_TAG_MAGIC(t) (((t) >> 56) & 0x7f)

struct rd_msg {
	struct rd_msg *next;
	uint8_t *buf;        /* queued: owned (allocated with the message); direct: the caller's */
	uint32_t len, got;
	uint16_t src;
	uint16_t seq;
	uint8_t epoch;
	uint8_t direct;      /* placed straight into the waiting pn_rd_recv's buffer */
	uint8_t discard;     /* no memory: consume the packets, drop the message */
};

struct rd_peer {
	struct rd_msg *active;   /* message being reassembled from this node */
	struct rd_msg sink;      /* bookkeeping of a message dropped for want of memory */
	uint16_t tx_seq;         /* next sequence number to this node */
};

struct pn_rd {
	pn_hal_t *h;
	int own_hal;
	uint32_t node, nodes, ctx;
	uint8_t epoch;
	struct rd_peer *peers;
	struct rd_msg *qhead, *qtail;   /* complete messages, in completion order */
	/* the pn_rd_recv in progress */
	int want;
	int want_src;
	uint8_t *want_buf;
	size_t want_cap;
	struct rd_msg dmsg;             /* the message placed into want_buf */
	int direct_busy, direct_done;
	/* The DMA bounce ring (RD_RING_BYTES of DMA memory, allocated at the first bounce
	 * send): each chunk takes the next contiguous bytes (a chunk that would wrap starts
	 * at the ring's base; the skipped tail counts as its own), and is given back when
	 * the NIC has completed its descriptor. Offsets are absolute (mod 2^64): bytes
	 * [released, alloc) are in flight; slot[i % RD_RING_SLOTS] for in-flight chunks
	 * oldest..oldest+count-1: the descriptor count that completes it and the end offset
	 * it frees up to. */
	uint8_t *ring;
	uint64_t alloc, released;
	struct rd_slot {
		uint32_t ticket;
		uint64_t end;
	} slot[64];
	unsigned oldest, count;
	int64_t timeout_ns; /* no send progress this long: the call fails (0: never) */
	int pio_pending;   /* the last send was PIO: a DMA send must wait for it first */
	int dma_pending;   /* a bounce-buffer DMA may still run: a PIO send must wait for it */
	pn_rd_stats_t st;
};

static int rd_link_down(pn_rd_t *rd, int *fw);

/* ---- receive side ---------------------------------------------------------------------- */

static int src_match(int want, uint16_t src)
{
	return want == PN_ANY || want == (int)src;
}

static struct rd_msg *queue_find(pn_rd_t *rd, int src, struct rd_msg **prev)
{
	struct rd_msg *p = NULL;
	for (struct rd_msg *m = rd->qhead; m; p = m, m = m->next)
		if (src_match(src, m->src)) {
			if (prev)
				*prev = p;
			return m;
		}
	return NULL;
}

static void queue_unlink(pn_rd_t *rd, struct rd_msg *m, struct rd_msg *prev)
{
	if (prev)
		prev->next = m->next;
	else
		rd->qhead = m->next;
	if (rd->qtail == m)
		rd->qtail = prev;
	rd->st.queued_msgs--;
	rd->st.queued_bytes -= m->len;
}

static void msg_free(pn_rd_t *rd, struct rd_msg *m)
{
	if (m == &rd->dmsg) {
		rd->direct_busy = 0;
		rd->direct_done = 0;
		return;
	}
	free(m);
}

static struct rd_msg *msg_new(pn_rd_t *rd, struct rd_peer *p, uint16_t src, uint32_t len, uint16_t seq,
			      uint8_t epoch)
{
	struct rd_msg *m;

	if (rd->want && !rd->direct_busy && src_match(rd->want_src, src) && len <= rd->want_cap &&
	    !queue_find(rd, rd->want_src, NULL)) {
		m = &rd->dmsg;
		memset(m, 0, sizeof(*m));
		m->buf = rd->want_buf;
		m->direct = 1;
		rd->direct_busy = 1;
		rd->direct_done = 0;
	} else {
		m = malloc(sizeof(*m) + (len ? len : 1));
		if (!m) {
			rd->st.nomem++;
			m = &p->sink;
			memset(m, 0, sizeof(*m));
			m->discard = 1;
		} else {
			memset(m, 0, sizeof(*m));
			m->buf = (uint8_t *)(m + 1);
		}
	}
	m->src = src;
	m->len = len;
	m->seq = seq;
	m->epoch = epoch;
	return m;
}

static void msg_abort(pn_rd_t *rd, struct rd_peer *p)
{
	struct rd_msg *m = p->active;
	p->active = NULL;
	rd->st.aborted++;
	if (m->discard)
		return;
	msg_free(rd, m);
}

static void msg_complete(pn_rd_t *rd, struct rd_peer *p, struct rd_msg *m)
{
	p->active = NULL;
	if (m->discard)
		return;
	if (m->direct) {
		rd->direct_done = 1;
		return;
	}
	m->next = NULL;
	if (rd->qtail)
		rd->qtail->next = m;
	else
		rd->qhead = m;
	rd->qtail = m;
	rd->st.queued_msgs++;
	rd->st.queued_bytes += m->len;
}

/* Take one packet from the RX ring: 1 if one was handled, 0 if none, <0 error. */
static int rd_poll_one(pn_rd_t *rd)
{
	pn_header_t hd;
	struct rd_peer *p;
	struct rd_msg *m;
	int r = pn_recv_header(rd->h, &hd);

	if (r <= 0)
		return r;
	if (hd.type != PN_TYPE_DATA || RD_TAG_MAGIC(hd.tag) != RD_MAGIC || hd.src_node >= rd->nodes ||
	    hd.src_ctx != rd->ctx || RD_TAG_LEN(hd.tag) > PN_RD_MAX_MSG) {
		rd->st.foreign++;
		pn_recv_skip(rd->h);
		return 1;
	}
	p = &rd->peers[hd.src_node];
	m = p->active;
	if ((hd.tag & RD_TAG_FIRST) && (hd.flags & PN_FLAG_SOM)) {
		if (m)
			msg_abort(rd, p);   /* the sender restarted or broke off its last message */
		m = p->active = msg_new(rd, p, hd.src_node, RD_TAG_LEN(hd.tag), RD_TAG_SEQ(hd.tag),
					RD_TAG_EPOCH(hd.tag));
	} else if (!m || m->seq != RD_TAG_SEQ(hd.tag) || m->epoch != RD_TAG_EPOCH(hd.tag) ||
		   m->len != RD_TAG_LEN(hd.tag)) {
		rd->st.stray++;
		pn_recv_skip(rd->h);
		return 1;
	}
	if (hd.length > m->len - m->got) {   /* more than the message holds: broken sender */
		rd->st.stray++;
		pn_recv_skip(rd->h);
		msg_abort(rd, p);
		return 1;
	}
	if (m->discard)
		pn_recv_skip(rd->h);
	else if ((r = pn_recv_body(rd->h, m->buf + m->got, hd.length)) < 0)
		return r;
	m->got += hd.length;
	if ((hd.flags & PN_FLAG_EOM) && m->got == m->len)
		msg_complete(rd, p, m);
	return 1;
}

static int rd_drain(pn_rd_t *rd, int max)
{
	int n = 0, r;
	while (n < max && (r = rd_poll_one(rd)) > 0)
		n++;
	return n;
}

static void rd_hook(pn_hal_t *h, void *arg)
{
	(void)h;
	rd_drain(arg, 256);
}

int pn_rd_progress(pn_rd_t *rd)
{
	if (!rd)
		return -EINVAL;
	return rd_drain(rd, 1 << 30);
}

/* 0, -EINVAL for a negative src other than PN_ANY (a bad argument), -EHOSTUNREACH for
 * a node the cluster does not have. */
static int check_src(pn_rd_t *rd, int src)
{
	if (src == PN_ANY)
		return 0;
	if (src < 0)
		return -EINVAL;
	return (uint32_t)src < rd->nodes ? 0 : -EHOSTUNREACH;
}

int pn_rd_peek(pn_rd_t *rd, int src, unsigned *src_out, size_t *len_out)
{
	struct rd_msg *m;
	int r;
	if (!rd)
		return -EINVAL;
	if ((r = check_src(rd, src)) < 0)
		return r;
	rd_drain(rd, 1 << 30);
	m = queue_find(rd, src, NULL);
	if (!m)
		return 0;
	if (src_out)
		*src_out = m->src;
	if (len_out)
		*len_out = m->len;
	return 1;
}

static int hand_out(pn_rd_t *rd, struct rd_msg *m, struct rd_msg *prev, void *buf, size_t cap,
		    unsigned *src_out, size_t *len_out)
{
	int len = (int)m->len;
	if (src_out)
		*src_out = m->src;
	if (len_out)
		*len_out = m->len;
	if (m->len > cap)
		return -EMSGSIZE;   /* stays queued */
	if (m->len)
		memcpy(buf, m->buf, m->len);
	queue_unlink(rd, m, prev);
	rd->st.recv_msgs++;
	rd->st.recv_bytes += m->len;
	msg_free(rd, m);
	return len;
}

/* The waiting pn_rd_recv gives up: a message being placed into its buffer moves to
 * memory of its own and carries on as a queued one. */
static void undirect(pn_rd_t *rd)
{
	struct rd_msg *d = &rd->dmsg;
	if (!rd->direct_busy)
		return;
	struct rd_peer *p = &rd->peers[d->src];
	struct rd_msg *m = malloc(sizeof(*m) + (d->len ? d->len : 1));
	if (!m) {
		rd->st.nomem++;
		if (p->active == d)
			msg_abort(rd, p);
		rd->direct_busy = rd->direct_done = 0;
		return;
	}
	*m = *d;
	m->buf = (uint8_t *)(m + 1);
	m->direct = 0;
	if (d->got)
		memcpy(m->buf, d->buf, d->got);
	if (rd->direct_done) {
		msg_complete(rd, p, m);
	} else {
		p->active = m;
	}
	rd->direct_busy = rd->direct_done = 0;
}

int pn_rd_recv_timeout(pn_rd_t *rd, int src, void *buf, size_t cap, unsigned *src_out,
		       size_t *len_out, int64_t timeout_ns)
{
	struct pn_backoff b = {0};
	struct rd_msg *m, *prev = NULL;
	uint64_t t0 = 0, quiet = 0;
	uint32_t spins = 0;
	int r;

	if (!rd || (!buf && cap) || cap > (size_t)SSIZE_MAX)
		return -EINVAL;
	if ((r = check_src(rd, src)) < 0)
		return r;
	if (rd->want)
		return -EBUSY;
	if ((m = queue_find(rd, src, &prev)))
		return hand_out(rd, m, prev, buf, cap, src_out, len_out);

	rd->want = 1;
	rd->want_src = src;
	rd->want_buf = buf;
	rd->want_cap = cap;
	for (;;) {
		int n = rd_drain(rd, 64);
		if (rd->direct_done) {
			m = &rd->dmsg;
			r = (int)m->len;
			if (src_out)
				*src_out = m->src;
			if (len_out)
				*len_out = m->len;
			rd->st.recv_msgs++;
			rd->st.recv_bytes += m->len;
			msg_free(rd, m);
			break;
		}
		if (!rd->direct_busy && (m = queue_find(rd, src, &prev))) {
			r = hand_out(rd, m, prev, buf, cap, src_out, len_out);
			break;
		}
		if (n == 0) {
			/* Waiting for ever, but not on a network that cannot deliver: nothing for
			 * the deadline, a link DOWN and no firmware to route around it. */
			if (timeout_ns < 0 && rd->timeout_ns > 0) {
				uint64_t now = pn_deadline_ns(rd->h);
				int fw;
				if (!quiet) {
					quiet = now;
				} else if (now - quiet >= (uint64_t)rd->timeout_ns) {
					quiet = now;
					if (rd_link_down(rd, &fw) && !fw) {
						rd->st.timeouts++;
						undirect(rd);
						r = -ENETDOWN;
						break;
					}
				}
			}
			if (timeout_ns >= 0) {
				uint64_t now = pn_monotonic_ns();
				if (!t0)
					t0 = now;
				if (timeout_ns == 0 || now - t0 >= (uint64_t)timeout_ns) {
					undirect(rd);
					r = -ETIMEDOUT;
					break;
				}
			}
			/* Nothing came: a simulator or device that went away sends nothing more. */
			if ((r = pn_wait_alive(rd->h, &spins)) < 0) {
				undirect(rd);
				break;
			}
			pn_backoff_step(&b);
		} else {
			pn_backoff_reset(&b);
			quiet = 0;
		}
	}
	rd->want = 0;
	rd->want_buf = NULL;
	return r;
}

int pn_rd_recv(pn_rd_t *rd, int src, void *buf, size_t cap, unsigned *src_out, size_t *len_out)
{
	return pn_rd_recv_timeout(rd, src, buf, cap, src_out, len_out, -1);
}

/* ---- deadline -------------------------------------------------------------------------- */

/* Does the NIC report a link DOWN? Every node the backend can see (sim: the whole cluster,
 * pci: this board, sw: no links). *fw: some node runs firmware (which routes around a
 * DOWN link and restarts it). */
static int rd_link_down(pn_rd_t *rd, int *fw)
{
	pn_node_status_t st;
	int down = 0;

	*fw = 0;
	for (unsigned i = 0; i < 1024; i++) {
		memset(&st, 0, sizeof(st));
		if (pn_cluster_status(rd->h, i, &st) < 0)
			break;
		if (st.fw_state == PN_FW_STATE_ERROR)
			*fw = -1;      /* a firmware gave up (partitioned ...): nobody will repair */
		else if (st.fw_state != PN_FW_STATE_NONE && *fw == 0)
			*fw = 1;
		for (unsigned p = 0; p < st.n_links && p < PN_STATUS_LINKS; p++)
			if (st.links[p].state == PN_LINK_STATE_DOWN)
				down = 1;
	}
	return down;
}

/* A send made no progress for the deadline (pn_hal_wait's stall): 0 to keep waiting (a
 * firmware is repairing: it routes around a DOWN link, evacuates and restarts it; up to
 * RD_FW_GRACE deadlines), else the error to return. */
#define RD_FW_GRACE 5
struct rd_stall {
	pn_rd_t *rd;
	unsigned grace;
};

static int rd_stalled(void *arg)
{
	struct rd_stall *s = arg;
	int fw, down = rd_link_down(s->rd, &fw);
	if (fw > 0 && s->grace < RD_FW_GRACE) {
		s->grace++;
		return 0;
	}
	s->rd->st.timeouts++;
	return down ? -ENETDOWN : -ETIMEDOUT;
}

/* Wait for the NIC with the HAL's own loop (receiving meanwhile through the wait hook),
 * but give up once neither the TX ring nor the PIO window moved for rd->timeout_ns:
 * -ENETDOWN when the NIC reports a link DOWN, else -ETIMEDOUT (docs/userlib.md,
 * "Deadlines"); -EIO/-ENODEV when the simulator or device went away. */
static int rd_wait(pn_rd_t *rd, enum pn_wait_for what, uint32_t count)
{
	struct rd_stall s = {rd, 0};
	return pn_hal_wait(rd->h, what, count, rd->timeout_ns, rd_stalled, &s);
}

/* Everything posted has left: the DMA descriptors and the PIO window. */
static int rd_wait_all(pn_rd_t *rd)
{
	int r = rd_wait(rd, PN_WAIT_TX_DONE, rd->h->tx_tail);
	return r < 0 ? r : rd_wait(rd, PN_WAIT_PIO_WINDOW, 0);
}

int pn_rd_set_timeout(pn_rd_t *rd, int64_t timeout_ms)
{
	if (!rd || timeout_ms < 0 || timeout_ms > INT64_MAX / 1000000)
		return -EINVAL;
	rd->timeout_ns = timeout_ms * 1000000;
	return 0;
}

/* ---- send side ------------------------------------------------------------------------- */

/* The bounce ring: RD_RING_BYTES of DMA memory, at most RD_RING_SLOTS chunks in flight. */
#define RD_RING_BYTES (2 * (uint64_t)PN_RD_CHUNK)
#define RD_RING_SLOTS 64u
_Static_assert(RD_RING_SLOTS == sizeof(((pn_rd_t *)0)->slot) / sizeof(((pn_rd_t *)0)->slot[0]), "slots");
_Static_assert(RD_RING_BYTES >= 2 * (uint64_t)PN_RD_CHUNK - 1, "a chunk after any skip must fit");

/* Room for c bytes in the bounce ring: wait for the oldest chunks' descriptors to
 * complete until a contiguous c bytes and a slot are free. Returns the chunk's address
 * and its span (padding included) in *need, or NULL with *err set. */
static uint8_t *ring_take(pn_rd_t *rd, size_t c, uint64_t *need, int *err)
{
	uint64_t pos = rd->alloc % RD_RING_BYTES;
	uint64_t pad = pos + c > RD_RING_BYTES ? RD_RING_BYTES - pos : 0;

	*need = pad + c;
	while (rd->count == RD_RING_SLOTS || rd->alloc + *need - rd->released > RD_RING_BYTES) {
		struct rd_slot *o = &rd->slot[rd->oldest % RD_RING_SLOTS];
		if ((*err = rd_wait(rd, PN_WAIT_TX_DONE, o->ticket)) < 0)
			return NULL;
		rd->released = o->end;
		rd->oldest++;
		rd->count--;
	}
	return rd->ring + (pos + pad) % RD_RING_BYTES;
}

/* A message above the PIO threshold: DMA, in place when buf is registered (and wait
 * for it: the caller may reuse buf on return), else through the bounce ring. */
static int send_dma(pn_rd_t *rd, unsigned dst_node, uint64_t tag, const void *buf, size_t len)
{
	pn_hal_t *h = rd->h;
	int r = 0;

	if (pn_mem_is_registered(h, buf, len)) {
		/* In place, chunks of the largest descriptor. */
		for (size_t off = 0; off < len && r == 0; off += PN_MAX_DMA_LENGTH) {
			size_t c = len - off < PN_MAX_DMA_LENGTH ? len - off : PN_MAX_DMA_LENGTH;
			if ((r = rd_wait(rd, PN_WAIT_TX_ROOM, 0)) < 0)
				break;
			r = pn_send_dma(h, dst_node, rd->ctx, off ? tag & ~RD_TAG_FIRST : tag,
					(const uint8_t *)buf + off, c);
		}
		if (r == 0)
			r = rd_wait_all(rd);
		return r;
	}
	/* The bounce ring: copy each chunk into the next free bytes and post it; a stream of
	 * messages keeps up to RD_RING_SLOTS chunks (and the TX ring's room) in flight, and
	 * waits only when the ring is full, for the oldest chunk's completion. Return once
	 * the last chunk is posted: the caller's buffer is free, the NIC reads only the ring. */
	if (!rd->ring) {
		void *m;
		if ((r = pn_dma_alloc(h, RD_RING_BYTES, &m)) < 0)
			return r;
		rd->ring = m;
	}
	for (size_t off = 0; off < len && r == 0; off += PN_RD_CHUNK) {
		size_t c = len - off < PN_RD_CHUNK ? len - off : PN_RD_CHUNK;
		uint64_t need;
		uint8_t *b = ring_take(rd, c, &need, &r);

		if (!b || (r = rd_wait(rd, PN_WAIT_TX_ROOM, 0)) < 0)
			break;
		memcpy(b, (const uint8_t *)buf + off, c);
		if ((r = pn_send_dma(h, dst_node, rd->ctx, off ? tag & ~RD_TAG_FIRST : tag, b, c)) < 0)
			break;
		rd->alloc += need;
		rd->slot[(rd->oldest + rd->count++) % RD_RING_SLOTS] = (struct rd_slot){pn_tx_posted(h), rd->alloc};
		rd->dma_pending = 1;
	}
	return r;
}

int pn_rd_send(pn_rd_t *rd, unsigned dst_node, const void *buf, size_t len)
{
	pn_hal_t *h;
	uint64_t tag;
	int r;

	if (!rd)
		return -EINVAL;
	h = rd->h;
	if (len > (size_t)SSIZE_MAX || (!buf && len))
		return -EINVAL;
	if (dst_node >= rd->nodes)
		return -EHOSTUNREACH;
	if (len > PN_RD_MAX_MSG)
		return -EMSGSIZE;
	tag = RD_TAG(len, rd->peers[dst_node].tx_seq, rd->epoch) | RD_TAG_FIRST;

	/* PIO and DMA are separate engines of the NIC and would not keep the order of our
	 * messages: before switching from one to the other, wait for what is in flight. */
	if ((long)len <= h->pio_threshold && len <= h->pio_max) {
		if (rd->dma_pending && (r = rd_wait_all(rd)) < 0)
			return r;
		rd->dma_pending = 0;
		if ((r = rd_wait(rd, PN_WAIT_PIO_WINDOW, 0)) < 0)
			return r;
		r = pn_send_pio(h, dst_node, rd->ctx, tag, buf, len);
		rd->pio_pending = r == 0;
	} else {
		if (rd->pio_pending && (r = rd_wait_all(rd)) < 0)
			return r;
		rd->pio_pending = 0;
		r = send_dma(rd, dst_node, tag, buf, len);
	}
	if (r < 0)
		return r;
	rd->peers[dst_node].tx_seq++;
	rd->st.sent_msgs++;
	rd->st.sent_bytes += len;
	return 0;
}

/* ---- open / close ----------------------------------------------------------------------- */

static int rd_setup(pn_rd_t **out, pn_hal_t *h, int own)
{
	pn_rd_t *rd = calloc(1, sizeof(*rd));
	if (!rd)
		return -ENOMEM;
	rd->h = h;
	rd->own_hal = own;
	rd->node = (uint32_t)pn_node_id(h);
	rd->nodes = (uint32_t)pn_num_nodes(h);
	rd->ctx = (uint32_t)pn_ctx_id(h);
	rd->peers = calloc(rd->nodes, sizeof(*rd->peers));
	if (!rd->peers) {
		free(rd);
		return -ENOMEM;
	}
	{
		uint64_t t = pn_monotonic_ns();
		uint32_t x = (uint32_t)getpid() * 2654435761u ^ (uint32_t)t ^ (uint32_t)(t >> 29);
		rd->epoch = (uint8_t)(x ^ (x >> 8) ^ (x >> 16) ^ (x >> 24));
	}
	rd->timeout_ns = (int64_t)PN_RD_DEFAULT_TIMEOUT_MS * 1000000;
	{
		const char *e = getenv("PARANIC_RD_TIMEOUT_MS");
		if (e && *e) {
			char *end;
			long long v;
			errno = 0;
			v = strtoll(e, &end, 0);
			if (errno || *end || v < 0 || v > INT64_MAX / 1000000) {
				free(rd->peers);
				free(rd);
				return -EINVAL;
			}
			rd->timeout_ns = (int64_t)v * 1000000;
		}
	}
	pn_set_wait_hook(h, rd_hook, rd);
	*out = rd;
	return 0;
}

int pn_rd_open(pn_rd_t **out, const pn_open_opts_t *opts)
{
	pn_open_opts_t o;
	pn_hal_t *h;
	int r;

	if (!out)
		return -EINVAL;
	*out = NULL;
	if (opts) {
		o = *opts;
	} else {
		pn_open_opts_init(&o);
		const char *c = getenv("PARANIC_CTX");
		if (c && *c) {
			char *end;
			long v = strtol(c, &end, 0);
			if (*end || v < 0 || v >= PN_MAX_CONTEXTS)
				return -EINVAL;
			o.ctx = (int)v;
		}
	}
	if (o.ctx == PN_CTX_ANY)
		o.ctx = PN_RD_CTX;
	if ((r = pn_open(&h, &o)) < 0)
		return r;
	if ((r = rd_setup(out, h, 1)) < 0)
		pn_close(h);
	return r;
}

int pn_rd_attach(pn_rd_t **out, pn_hal_t *h)
{
	if (!out || !h)
		return -EINVAL;
	*out = NULL;
	return rd_setup(out, h, 0);
}

int pn_rd_close(pn_rd_t *rd)
{
	if (!rd)
		return -EINVAL;
	/* A PIO packet may still be in the window (the hook still draining); bounded by the
	 * deadline: a send that can never finish is abandoned as pn_close does. */
	int r = rd_wait_all(rd);
	pn_set_wait_hook(rd->h, NULL, NULL);
	if (rd->ring)
		pn_dma_free(rd->h, rd->ring);
	for (uint32_t n = 0; n < rd->nodes; n++)
		if (rd->peers[n].active && !rd->peers[n].active->discard)
			msg_free(rd, rd->peers[n].active);
	while (rd->qhead) {
		struct rd_msg *m = rd->qhead;
		rd->qhead = m->next;
		msg_free(rd, m);
	}
	free(rd->peers);
	if (rd->own_hal)
		pn_close(rd->h);
	free(rd);
	return r;
}

pn_hal_t *pn_rd_hal(pn_rd_t *rd)
{
	return rd ? rd->h : NULL;
}

int pn_rd_stats(pn_rd_t *rd, pn_rd_stats_t *st)
{
	if (!rd || !st)
		return -EINVAL;
	*st = rd->st;
	return 0;
}
