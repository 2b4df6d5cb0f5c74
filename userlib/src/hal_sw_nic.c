/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The `sw` backend's NIC model: what NicCore does behind a context's doorbells, run
 * inline in the process that rings them (hal_sw.c has the backend around it).
 *
 *   PIO_DOORBELL  validate the staged header (length, type, every word of the packet
 *                 staged since the last PIO packet ended), stamp src_node/src_ctx,
 *                 deliver into the destination's RX ring, pio_done++;
 *   TX_TAIL       process descriptors: window check, cut into MTU packets with
 *                 SOM/EOM, deliver each, tx_done++ per descriptor (refused ones too);
 *   RX_HEAD       frees slots of this context's ring;
 *   BARRIER       a shared-memory barrier over the cluster's nodes, barrier_done++.
 *
 * Delivery into an RX ring (many producers): under the ring's lock, header and
 * payload are copied into the next slot, then the valid word (packet number + 1) is
 * stored with release semantics, then the ring's count. A full ring is back-pressure
 * (the packet stays pending, never dropped) unless the ring's owner is dead: then
 * the context is marked dead and packets to it are dropped and counted. The ring
 * lock holds the holder's pid, so a lock left by a killed process is taken over and
 * the half-written slot repaired. Work that cannot finish (a full ring) stays pending
 * and is resumed by pn_sw_engines (hal_sw.h) from the HAL's progress calls.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "hal_sw.h"

/* ---- locks with owner pid (taken over from a dead holder) ---------------------------- */

/* Returns 1 when the lock was taken over from a dead holder. */
static int sw_lock(struct sw_be *be, uint32_t *lk)
{
	struct pn_backoff b = {0};
	for (;;) {
		uint32_t cur = 0;
		if (__atomic_compare_exchange_n(lk, &cur, be->pid, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
			return 0;
		if ((b.n & 1023) == 1023 && cur && !pn_pid_alive(cur) &&
		    __atomic_compare_exchange_n(lk, &cur, be->pid, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
			return 1;
		pn_backoff_step(&b);
	}
}

/* A producer died while holding the ring lock: if it got as far as the valid word,
 * the packet is complete and the count must move past it; otherwise the slot is
 * simply rewritten by the next producer. */
static void ring_repair(struct sw_be *be, uint32_t n, uint32_t c)
{
	struct sw_ctx_meta *m = sw_meta(be, n, c);
	uint64_t a = m->rx_alloc;
	uint8_t *s = sw_rxr(be, n, c) + (size_t)(a & (be->rx_slots - 1)) * be->slot_bytes;
	uint64_t v = __atomic_load_n((uint64_t *)(s + be->slot_bytes - PN_RX_VALID_BYTES), __ATOMIC_ACQUIRE);
	if (v == a + 1)
		__atomic_store_n(&m->rx_alloc, a + 1, __ATOMIC_RELEASE);
}

void pn_sw_ring_lock(struct sw_be *be, uint32_t n, uint32_t c)
{
	if (sw_lock(be, &sw_meta(be, n, c)->ring_lock))
		ring_repair(be, n, c);
}

/* ---- delivery ---------------------------------------------------------------------------- */

static void sw_drop(struct sw_be *be, uint32_t n, struct sw_ctx_meta *m)
{
	__atomic_fetch_add(&m->dropped, 1, __ATOMIC_RELAXED);
	__atomic_fetch_add(&sw_node(be, n)->dropped, 1, __ATOMIC_RELAXED);
}

/* The destination ring is full: back-pressure, unless its owner died. */
static int sw_full(struct sw_be *be, uint32_t n, struct sw_ctx_meta *m)
{
	uint64_t now = pn_monotonic_ns();
	uint32_t owner, st = SW_OPEN;

	if (now - be->last_live_check < SW_LIVE_CHECK_NS)
		return -EAGAIN;
	be->last_live_check = now;
	owner = __atomic_load_n(&m->owner_pid, __ATOMIC_ACQUIRE);
	if (pn_pid_alive(owner))
		return -EAGAIN;
	__atomic_compare_exchange_n(&m->state, &st, SW_DEAD, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED);
	sw_drop(be, n, m);
	return 0;
}

static inline int ring_full(const struct sw_be *be, struct sw_ctx_meta *m)
{
	uint64_t a = __atomic_load_n(&m->rx_alloc, __ATOMIC_ACQUIRE);
	uint32_t hd = __atomic_load_n(&m->rx_head, __ATOMIC_ACQUIRE);
	return (uint32_t)a - hd >= be->rx_slots;
}

/* Deliver one packet (header words already stamped). 0: delivered or dropped;
 * -EAGAIN: the destination ring is full (try again later). */
static int sw_deliver(struct sw_be *be, uint32_t n, uint32_t c, const uint64_t hw[2],
		      const uint8_t *payload, uint32_t len)
{
	struct sw_ctx_meta *m;
	uint8_t *s;
	uint64_t a;

	if (n >= be->nodes) {   /* the routing table's DROP */
		__atomic_fetch_add(&be->hdr->unroutable, 1, __ATOMIC_RELAXED);
		return 0;
	}
	if (c >= be->contexts) {   /* the destination NIC's err_unknown_ctx */
		__atomic_fetch_add(&sw_node(be, n)->dropped, 1, __ATOMIC_RELAXED);
		return 0;
	}
	m = sw_meta(be, n, c);
	if (__atomic_load_n(&m->state, __ATOMIC_ACQUIRE) != SW_OPEN) {
		sw_drop(be, n, m);
		return 0;
	}
	if (ring_full(be, m))
		return sw_full(be, n, m);
	pn_sw_ring_lock(be, n, c);
	if (__atomic_load_n(&m->state, __ATOMIC_ACQUIRE) != SW_OPEN) {
		sw_unlock(&m->ring_lock);
		sw_drop(be, n, m);
		return 0;
	}
	if (ring_full(be, m)) {
		sw_unlock(&m->ring_lock);
		return sw_full(be, n, m);
	}
	a = m->rx_alloc;
	s = sw_rxr(be, n, c) + (size_t)(a & (be->rx_slots - 1)) * be->slot_bytes;
	if (be->fault_drop && ++be->fault_count % be->fault_drop == 0) {
		sw_unlock(&m->ring_lock);
		return 0;
	}
	memcpy(s + PN_RX_SLOT_HEADER_OFFSET, hw, PN_HEADER_BYTES);
	if (len)
		memcpy(s + PN_RX_SLOT_PAYLOAD_OFFSET, payload, len);
	if (be->fault_corrupt && len && ++be->fault_count % be->fault_corrupt == 0)
		s[PN_RX_SLOT_PAYLOAD_OFFSET + len / 2] ^= 0x40;
	__atomic_store_n((uint64_t *)(s + be->slot_bytes - PN_RX_VALID_BYTES), a + 1, __ATOMIC_RELEASE);
	__atomic_store_n(&m->rx_alloc, a + 1, __ATOMIC_RELEASE);
	sw_unlock(&m->ring_lock);
	return 0;
}

static inline void sts_store(struct sw_be *be, unsigned word, uint32_t v)
{
	__atomic_store_n(&be->meta->status[word], v, __ATOMIC_RELEASE);
}

/* Under be->eng (the engines count errors too). */
static void count_error(struct sw_be *be)
{
	sts_store(be, PN_STS_ERRORS_WORD, ++be->errors);
}

/* Contexts may send DATA and RMA only (BARRIER is the barrier unit's, CONTROL firmware's). */
static int type_ok(uint32_t t)
{
	return t == PN_TYPE_DATA || t == PN_TYPE_RMA_PUT || t == PN_TYPE_RMA_GET || t == PN_TYPE_RMA_RESP;
}

/* ---- PIO engine --------------------------------------------------------------------------- */

static uint32_t sw_pio_max(const struct sw_be *be)
{
	uint32_t m = PN_PIO_WINDOW_BYTES - PN_HEADER_BYTES;
	return be->mtu < m ? be->mtu : m;
}

void pn_sw_pio_try(struct sw_be *be)
{
	uint64_t *w = be->pio_hdr;
	int r = sw_deliver(be, (uint32_t)PN_GET(w, PN_HDR_DST_NODE), (uint32_t)PN_GET(w, PN_HDR_DST_CTX), w,
			   be->page + PN_PIO_WINDOW_OFFSET + PN_HEADER_BYTES, (uint32_t)PN_GET(w, PN_HDR_LENGTH));
	if (r == -EAGAIN)
		return;
	__atomic_store_n(&be->pio_staged, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&be->pio_pending, 0, __ATOMIC_RELEASE);
	sts_store(be, PN_STS_PIO_DONE_WORD, ++be->pio_done);
}

/* Words of a packet with len payload bytes: header and payload (spec: packet_words). */
static inline uint32_t pio_packet_words(uint64_t len)
{
	return (uint32_t)((PN_HEADER_BYTES + len + PN_WORD_BYTES - 1) / PN_WORD_BYTES);
}

/* A refused PIO packet: nothing sent, errors and pio_done move, staging starts again. */
static void pio_refuse(struct sw_be *be)
{
	__atomic_store_n(&be->pio_staged, 0, __ATOMIC_RELAXED);
	count_error(be);
	sts_store(be, PN_STS_PIO_DONE_WORD, ++be->pio_done);
}

static void sw_pio_doorbell_locked(struct sw_be *be)
{
	const volatile uint64_t *win = (const volatile uint64_t *)(be->page + PN_PIO_WINDOW_OFFSET);
	uint64_t *w = be->pio_hdr;

	if (be->pio_pending) {      /* PIO_BUSY: the doorbell is refused (and counted done) */
		count_error(be);
		sts_store(be, PN_STS_PIO_DONE_WORD, ++be->pio_done);
		return;
	}
	w[0] = win[0];
	w[1] = win[1];
	/* Refused as the gateware refuses: a spoiled window, a bad length or type, or a
	 * packet longer than what was staged since the last one (never send bytes the
	 * sender did not write for this packet). */
	if (be->pio_spoiled || PN_GET(w, PN_HDR_LENGTH) > sw_pio_max(be) ||
	    !type_ok((uint32_t)PN_GET(w, PN_HDR_TYPE)) ||
	    pio_packet_words(PN_GET(w, PN_HDR_LENGTH)) > __atomic_load_n(&be->pio_staged, __ATOMIC_RELAXED)) {
		be->pio_spoiled = 0;
		pio_refuse(be);
		return;
	}
	/* Stamp as the hardware does: source fields, vc, direct and rsvd zero, only SOM/EOM kept. */
	if (!be->fault_nostamp) {
		PN_SET(w, PN_HDR_SRC_NODE, be->node);
		PN_SET(w, PN_HDR_SRC_CTX, be->ctx);
	}
	PN_SET(w, PN_HDR_VC, 0);
	PN_SET(w, PN_HDR_DIRECT, 0);   /* link-local packets are the management port's */
	w[0] &= ~(~0ull << (PN_HDR_DIRECT_SHIFT + PN_HDR_DIRECT_WIDTH));   /* rsvd (no macro) */
	PN_SET(w, PN_HDR_FLAGS, PN_GET(w, PN_HDR_FLAGS) & (PN_FLAG_SOM | PN_FLAG_EOM));
	__atomic_store_n(&be->pio_pending, 1, __ATOMIC_RELAXED);
	pn_sw_pio_try(be);
}

/* Under the engine lock: another thread's progress call may run this engine. */
static void sw_pio_doorbell(struct sw_be *be)
{
	pthread_mutex_lock(&be->eng);
	sw_pio_doorbell_locked(be);
	pthread_mutex_unlock(&be->eng);
}

/* ---- DMA TX engine ----------------------------------------------------------------------- */

static int window_ok(const struct sw_be *be, uint64_t addr, uint64_t len)
{
	if (addr + len < addr)
		return 0;
	for (int i = 0; i < be->nwin; i++)
		if (addr >= be->win[i].base && addr - be->win[i].base <= be->win[i].len &&
		    len <= be->win[i].len - (addr - be->win[i].base))
			return 1;
	return 0;
}

void pn_sw_tx_run(struct sw_be *be)
{
	while (be->tx_head != be->tx_tail) {
		uint64_t *d = be->cur_desc;
		uint32_t len, dn, dc, type;

		if (!be->cur_checked) {
			const volatile uint64_t *ring = (const volatile uint64_t *)
				(be->txr + (size_t)(be->tx_head & (be->tx_entries - 1)) * PN_TX_DESC_BYTES);
			for (int i = 0; i < 4; i++)
				d[i] = ring[i];
			len = (uint32_t)PN_GET(d, PN_DESC_LENGTH);
			if (len > PN_MAX_DMA_LENGTH || !type_ok((uint32_t)PN_GET(d, PN_DESC_TYPE)) ||
			    (len && !window_ok(be, PN_GET(d, PN_DESC_ADDR), len))) {
				count_error(be);
				be->tx_head++;
				sts_store(be, PN_STS_TX_DONE_WORD, ++be->tx_done);
				continue;
			}
			be->cur_checked = 1;
			be->cur_off = 0;
		}
		len = (uint32_t)PN_GET(d, PN_DESC_LENGTH);
		dn = (uint32_t)PN_GET(d, PN_DESC_DST_NODE);
		dc = (uint32_t)PN_GET(d, PN_DESC_DST_CTX);
		type = (uint32_t)PN_GET(d, PN_DESC_TYPE);
		do {
			uint32_t off = be->cur_off;
			uint32_t plen = len - off < be->mtu ? len - off : be->mtu;
			uint64_t hw[2] = {0, 0};
			PN_SET(hw, PN_HDR_DST_NODE, dn);
			PN_SET(hw, PN_HDR_SRC_NODE, be->fault_nostamp ? 0 : be->node);
			PN_SET(hw, PN_HDR_DST_CTX, dc);
			PN_SET(hw, PN_HDR_SRC_CTX, be->fault_nostamp ? 0 : be->ctx);
			PN_SET(hw, PN_HDR_TYPE, type);
			PN_SET(hw, PN_HDR_LENGTH, plen);
			PN_SET(hw, PN_HDR_FLAGS, (off == 0 ? PN_FLAG_SOM : 0) | (off + plen == len ? PN_FLAG_EOM : 0));
			PN_SET(hw, PN_HDR_TAG, PN_GET(d, PN_DESC_TAG));
			if (sw_deliver(be, dn, dc, hw, (const uint8_t *)(uintptr_t)(PN_GET(d, PN_DESC_ADDR) + off),
				       plen) == -EAGAIN)
				return;
			be->cur_off = off + plen;
		} while (be->cur_off < len);
		be->cur_checked = 0;
		be->tx_head++;
		sts_store(be, PN_STS_TX_DONE_WORD, ++be->tx_done);
	}
}

static void sw_tx_tail(struct sw_be *be, uint32_t v)
{
	pthread_mutex_lock(&be->eng);
	if (v - be->tx_head > be->tx_entries) {   /* beyond the ring: refused */
		count_error(be);
	} else {
		be->tx_tail = v;
		pn_sw_tx_run(be);
	}
	pthread_mutex_unlock(&be->eng);
}

/* ---- barrier ------------------------------------------------------------------------------- */

static void sw_barrier_enter(struct sw_be *be)
{
	struct sw_shm_hdr *g = be->hdr;
	struct sw_node *nd = sw_node(be, be->node);
	uint64_t bit = 1ull << be->ctx;

	sw_lock(be, &g->bar_lock);
	if (!nd->bar_cur) {              /* the node enters with its first context */
		nd->bar_cur = bit;
		g->bar_arrived++;
	} else if (!(nd->bar_cur & bit)) {
		nd->bar_cur |= bit;      /* further contexts of the node ride along */
	} else {
		g->bar_merged++;         /* already waiting: counts once, one done */
	}
	if (g->bar_arrived >= g->nodes) {
		for (uint32_t n = 0; n < g->nodes; n++) {
			struct sw_node *x = sw_node(be, n);
			uint64_t mask = x->bar_cur;
			while (mask) {
				uint32_t c = (uint32_t)__builtin_ctzll(mask);
				mask &= mask - 1;
				__atomic_fetch_add(&sw_meta(be, n, c)->status[PN_STS_BARRIER_DONE_WORD], 1,
						   __ATOMIC_RELEASE);
			}
			x->bar_cur = 0;
		}
		g->bar_arrived = 0;
		g->bar_episode++;
	}
	sw_unlock(&g->bar_lock);
}

/* Take a context out of any barrier episode it is part of (close, reclaim). */
void pn_sw_barrier_leave(struct sw_be *be, uint32_t c)
{
	struct sw_shm_hdr *g = be->hdr;
	struct sw_node *nd = sw_node(be, be->node);
	uint64_t bit = 1ull << c;

	sw_lock(be, &g->bar_lock);
	if (nd->bar_cur & bit) {
		nd->bar_cur &= ~bit;
		if (!nd->bar_cur)
			g->bar_arrived--;
	}
	sw_unlock(&g->bar_lock);
}

/* ---- MMIO ------------------------------------------------------------------------------------ */

/* A store of n bytes at off into the PIO window (every one comes through here: the
 * backend maps no page for direct stores). Refused while a packet is pending (it spoils
 * the next doorbell, as in the gateware); otherwise it marks the 64-bit words it
 * reaches staged. */
static void window_store(struct sw_be *be, uint32_t off, const void *v, size_t n)
{
	uint32_t words = (uint32_t)((off - PN_PIO_WINDOW_OFFSET + n + PN_WORD_BYTES - 1) / PN_WORD_BYTES);

	if (__atomic_load_n(&be->pio_pending, __ATOMIC_ACQUIRE)) {
		be->pio_spoiled = 1;
		return;
	}
	memcpy(be->page + off, v, n);
	if (words > __atomic_load_n(&be->pio_staged, __ATOMIC_RELAXED))
		__atomic_store_n(&be->pio_staged, words, __ATOMIC_RELAXED);
}

/* A PIO packet but its header word 0 staged at once: the same as its 64-bit window
 * stores (hal_send.c pio_stage_ring): the tag word, the full words, a zero-padded last
 * word. Header word 0 follows through PIO_SEND. */
void pn_sw_pio_stage(pn_hal_t *h, const uint64_t hdr[2], const void *buf, size_t len)
{
	struct sw_be *be = h->be;
	size_t full = len - len % PN_WORD_BYTES;

	window_store(be, PN_PIO_WINDOW_OFFSET + PN_WORD_BYTES, &hdr[1], PN_WORD_BYTES);
	if (full)
		window_store(be, PN_PIO_WINDOW_OFFSET + PN_HEADER_BYTES, buf, full);
	if (len % PN_WORD_BYTES) {
		uint64_t v = 0;
		memcpy(&v, (const uint8_t *)buf + full, len % PN_WORD_BYTES);
		window_store(be, (uint32_t)(PN_PIO_WINDOW_OFFSET + PN_HEADER_BYTES + full), &v, PN_WORD_BYTES);
	}
}

void pn_sw_mmio_write32(pn_hal_t *h, uint32_t off, uint32_t v)
{
	struct sw_be *be = h->be;
	switch (off) {
	case PN_REG_PIO_DOORBELL:
		sw_pio_doorbell(be);
		break;
	case PN_REG_TX_TAIL:
		sw_tx_tail(be, v);
		break;
	case PN_REG_RX_HEAD:
		if (v - __atomic_load_n(&be->meta->rx_head, __ATOMIC_RELAXED) <=
		    (uint32_t)__atomic_load_n(&be->meta->rx_alloc, __ATOMIC_ACQUIRE) -
		    __atomic_load_n(&be->meta->rx_head, __ATOMIC_RELAXED))
			__atomic_store_n(&be->meta->rx_head, v, __ATOMIC_RELEASE);
		else {   /* frees slots that were never filled */
			pthread_mutex_lock(&be->eng);
			count_error(be);
			pthread_mutex_unlock(&be->eng);
		}
		break;
	case PN_REG_BARRIER:
		sw_barrier_enter(be);
		break;
	case PN_REG_IRQ_ARM:
		be->meta->irq_armed = 1;   /* no interrupts in sw: receive is polled */
		break;
	case PN_REG_PIO_SEND:          /* store+doorbell, lower half: window word 0's, no ring */
		window_store(be, PN_PIO_WINDOW_OFFSET, &v, 4);
		break;
	case PN_REG_PIO_SEND + 4:      /* upper half: stored, then the doorbell */
		window_store(be, PN_PIO_WINDOW_OFFSET + 4, &v, 4);
		sw_pio_doorbell(be);
		break;
	default:
		if (off >= PN_PIO_WINDOW_OFFSET && off + 4 <= PN_PIO_WINDOW_OFFSET + PN_PIO_WINDOW_BYTES)
			window_store(be, off, &v, 4);
		break;
	}
}

void pn_sw_mmio_write64(pn_hal_t *h, uint32_t off, uint64_t v)
{
	struct sw_be *be = h->be;
	if (off >= PN_PIO_WINDOW_OFFSET && off + 8 <= PN_PIO_WINDOW_OFFSET + PN_PIO_WINDOW_BYTES && !(off & 7))
		window_store(be, off, &v, 8);
	else if (off == PN_REG_PIO_SEND) {   /* store+doorbell: window word 0, then the ring */
		window_store(be, PN_PIO_WINDOW_OFFSET, &v, 8);
		sw_pio_doorbell(be);
	} else
		pn_sw_mmio_write32(h, off, (uint32_t)v);
}

uint32_t pn_sw_mmio_read32(pn_hal_t *h, uint32_t off)
{
	struct sw_be *be = h->be;
	struct sw_ctx_meta *m = be->meta;
	uint32_t v = 0;
	switch (off) {
	case PN_REG_STATUS:
		if (__atomic_load_n(&m->state, __ATOMIC_ACQUIRE) == SW_OPEN)
			v |= PN_STATUS_ENABLED;
		if (be->pio_pending)
			v |= PN_STATUS_PIO_BUSY;
		if (be->tx_head != be->tx_tail)
			v |= PN_STATUS_TX_BUSY;
		if (ring_full(be, m))
			v |= PN_STATUS_RX_FULL;
		if (m->irq_armed)
			v |= PN_STATUS_IRQ_ARMED;
		return v;
	case PN_REG_RX_TAIL:
		return (uint32_t)__atomic_load_n(&m->rx_alloc, __ATOMIC_ACQUIRE);
	case PN_REG_TX_HEAD:
		return be->tx_head;
	case PN_REG_PIO_DONE:
		return be->pio_done;
	case PN_REG_ERRORS:
		return be->errors;
	default:
		return 0;
	}
}
