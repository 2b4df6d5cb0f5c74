/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * iso_test: isolation between the owners of a context, and memory the NIC still reads
 * (docs/reliability.md), on any backend (sw, sim; one process, nodes 0 and 1).
 *
 *   iso_test BACKEND CLUSTER [CASE]     CASE: handover, dereg (default: both)
 *
 * handover  Owner A of node 0's context 3 sends 1000 bytes of a pattern by PIO and
 *           receives a packet; it closes. The new owner B of the same context:
 *           - finds its RX ring and status block zero (nothing of A's to read);
 *           - rings a PIO header saying 1000 bytes with no payload staged: the NIC
 *             refuses it (errors and pio_done move, nothing is sent), where it used to
 *             send A's last 1000 PIO bytes;
 *           - stages a 1000-byte header and only the packet's last word (stores into
 *             the window through the backend, as a program writing its page would):
 *             the packet arrives with zeros between, never A's bytes (the buffer was
 *             cleared at the hand-over).
 * dereg     A DMA send from a buffer to a receiver that does not consume stays pending;
 *           pn_dma_free and pn_mem_deregister of its memory return -EBUSY and keep it
 *           (sw: memory of the caller's own mmap, which is still mapped afterwards);
 *           once the receiver drained and pn_tx_wait returned, both succeed.
 *
 * Prints "ok CASE ..." per case and "PASS"; exit 0 only on success.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "paranic/pn_hal.h"
#include "../src/hal_backend.h"   /* the test stores into the PIO window word by word */
#include "tutil.h"

#define NODE_A 0
#define NODE_R 1
#define CTX_A 3
#define CTX_R 2
#define ISO_LEN 1000
#define PAT_A 0xA5
#define PAT_R 0x5C
#define SENTINEL 0x53454e54ull
#define TAG_DMA 0x444d41ull

static const char *backend, *cluster;

static int open_ctx(pn_hal_t **h, int node, int ctx, int rx_slots)
{
	pn_open_opts_t o;
	pn_open_opts_init(&o);
	o.backend = backend;
	o.cluster = cluster;
	o.node = node;
	o.nodes = strcmp(backend, "sw") == 0 ? 2 : 0;
	o.ctx = ctx;
	if (strcmp(backend, "sw") != 0)
		o.rx_slots = rx_slots;   /* sim: per context; sw: the cluster's shape */
	return pn_open(h, &o);
}

/* The next packet of h (waiting as long as it takes: the test's own timeout bounds it). */
static int next_packet(pn_hal_t *h, pn_header_t *hd, uint8_t *buf, size_t cap)
{
	int r;
	while ((r = pn_recv_wait(h, hd, 1000000000)) == 0)
		;
	CHECK(r == 1, "pn_recv_wait returned %d", r);
	CHECK(hd->length <= cap, "a packet of %u bytes", hd->length);
	EXPECT_RC(pn_recv_body(h, buf, cap), (int)hd->length);
	return 0;
}

static int all_zero(const volatile uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return 0;
	return 1;
}

static int case_handover(void)
{
	pn_hal_t *a, *b, *r;
	pn_header_t hd;
	pn_status_t st;
	uint8_t pat[ISO_LEN], buf[2048];
	uint64_t w[2] = {0, 0};
	t_case = "handover";

	EXPECT_RC(open_ctx(&r, NODE_R, CTX_R, 0), 0);
	EXPECT_RC(open_ctx(&a, NODE_A, CTX_A, 0), 0);
	CHECK(pn_pio_max(a) >= ISO_LEN, "PIO max %d", pn_pio_max(a));

	/* A: sends its secret by PIO, receives R's secret into its ring, leaves. */
	memset(pat, PAT_A, sizeof(pat));
	EXPECT_RC(pn_send_pio(a, NODE_R, CTX_R, 1, pat, ISO_LEN), 0);
	if (next_packet(r, &hd, buf, sizeof(buf)) < 0)
		return -1;
	CHECK(hd.length == ISO_LEN && buf[0] == PAT_A && buf[ISO_LEN - 1] == PAT_A, "A's packet");
	memset(pat, PAT_R, sizeof(pat));
	EXPECT_RC(pn_send_pio(r, NODE_A, CTX_A, 2, pat, ISO_LEN), 0);
	while ((pn_status(a, &st), st.rx_tail) == 0)   /* in A's ring, unread */
		pn_progress(r);
	EXPECT_RC(pn_tx_wait(a), 0);
	EXPECT_RC(pn_close(a), 0);

	/* B: the same context, a new owner. */
	EXPECT_RC(open_ctx(&b, NODE_A, CTX_A, 0), 0);
	EXPECT_RC(pn_status(b, &st), 0);
	CHECK(st.pio_done == 0 && st.tx_done == 0 && st.errors == 0 && st.rx_tail == 0,
	      "status of the new owner: pio_done %u tx_done %u errors %u rx_tail %u", st.pio_done, st.tx_done,
	      st.errors, st.rx_tail);
	CHECK(all_zero(b->map.rx_ring, (size_t)b->map.rx_slots * b->map.rx_slot_bytes),
	      "the new owner's RX ring holds bytes of the last owner's packets");

	/* A header saying 1000 bytes, nothing staged: refused, nothing sent. */
	PN_SET(w, PN_HDR_DST_NODE, NODE_R);
	PN_SET(w, PN_HDR_DST_CTX, CTX_R);
	PN_SET(w, PN_HDR_TYPE, PN_TYPE_DATA);
	PN_SET(w, PN_HDR_LENGTH, ISO_LEN);
	PN_SET(w, PN_HDR_FLAGS, PN_FLAG_SOM | PN_FLAG_EOM);
	PN_SET(w, PN_HDR_TAG, 3);
	EXPECT_RC(pn_pio_raw(b, w, NULL, 0), 0);
	EXPECT_RC(pn_tx_wait(b), 0);
	EXPECT_RC(pn_status(b, &st), 0);
	CHECK(st.pio_done == 1 && st.errors == 1, "unstaged header: pio_done %u errors %u (want 1 1: refused)",
	      st.pio_done, st.errors);
	EXPECT_RC(pn_send_pio(b, NODE_R, CTX_R, SENTINEL, "sentinel", 8), 0);
	if (next_packet(r, &hd, buf, sizeof(buf)) < 0)
		return -1;
	CHECK(hd.tag == SENTINEL, "R received tag %#llx of %u bytes (byte 100: %#x) before the sentinel",
	      (unsigned long long)hd.tag, hd.length, hd.length > 100 ? buf[100] : 0);

	/* Header and the last word only: zeros between (the window was cleared). */
	{
		uint32_t win = PN_PIO_WINDOW_OFFSET, last = (uint32_t)(PN_HEADER_BYTES + (ISO_LEN - 8));
		uint64_t tail = 0x1122334455667788ull;
		PN_SET(w, PN_HDR_TAG, 4);
		EXPECT_RC(pn_tx_wait(b), 0);
		b->ops->mmio_write64(b, win, w[0]);
		b->ops->mmio_write64(b, win + 8, w[1]);
		b->ops->mmio_write64(b, win + last, tail);
		b->pio_posted++;
		b->ops->mmio_write32(b, PN_REG_PIO_DOORBELL, PN_HEADER_BYTES + ISO_LEN);
		if (next_packet(r, &hd, buf, sizeof(buf)) < 0)
			return -1;
		CHECK(hd.tag == 4 && hd.length == ISO_LEN, "sparse packet: tag %llu length %u",
		      (unsigned long long)hd.tag, hd.length);
		CHECK(memcmp(buf, "sentinel", 8) == 0, "word 0 is not B's own last payload");
		CHECK(all_zero(buf + 8, ISO_LEN - 16), "sparse packet carries bytes B never wrote (byte 100: %#x)",
		      buf[100]);
		CHECK(memcmp(buf + ISO_LEN - 8, &tail, 8) == 0, "the staged last word");
	}
	EXPECT_RC(pn_tx_wait(b), 0);
	EXPECT_RC(pn_status(b, &st), 0);
	CHECK(st.errors == 1 && st.pio_done == 3, "errors %u pio_done %u", st.errors, st.pio_done);
	EXPECT_RC(pn_close(b), 0);
	EXPECT_RC(pn_close(r), 0);
	say("ok handover new owner: ring and status zero, unstaged header refused, unwritten bytes zero");
	return 0;
}

/* Receive and drop packets of r until bytes payload bytes came. */
static int drain(pn_hal_t *r, pn_hal_t *s, size_t bytes)
{
	pn_header_t hd;
	size_t got = 0;
	while (got < bytes) {
		int k = pn_recv_wait(r, &hd, 1000000);
		if (k == 1) {
			CHECK(hd.tag == TAG_DMA, "tag %#llx", (unsigned long long)hd.tag);
			got += hd.length;
			EXPECT_RC(pn_recv_skip(r), (int)hd.length);
		}
		pn_progress(s);
	}
	CHECK(got == bytes, "%zu bytes received, %zu sent", got, bytes);
	return 0;
}

static int case_dereg(void)
{
	pn_hal_t *s, *r;
	pn_status_t st;
	int sw = strcmp(backend, "sw") == 0;
	uint8_t *buf, *reg;
	size_t len, rlen = 64 * 1024;
	t_case = "dereg";

	EXPECT_RC(open_ctx(&r, NODE_R, CTX_R, 8), 0);
	EXPECT_RC(open_ctx(&s, NODE_A, CTX_A, 0), 0);
	/* More than the receiver's ring and the network hold: pending while r does not read. */
	EXPECT_RC(pn_status(r, &st), 0);
	len = ((size_t)st.rx_slots + 256) * (size_t)pn_mtu(s);   /* the network buffers some too */
	EXPECT_RC(pn_dma_alloc(s, len, (void **)&buf), 0);
	memset(buf, 0x42, len);
	EXPECT_RC(pn_send_dma(s, NODE_R, CTX_R, TAG_DMA, buf, len), 0);
	EXPECT_RC(pn_dma_free(s, buf), -EBUSY);
	/* Registered memory: sw, the caller's own mapping (the NIC reads it directly);
	 * sim, memory of its heap (the only memory the simulated NIC reaches). */
	if (sw) {
		reg = mmap(NULL, rlen, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		CHECK(reg != MAP_FAILED, "mmap");
	} else {
		EXPECT_RC(pn_dma_alloc(s, rlen, (void **)&reg), 0);
	}
	memset(reg, 0x42, rlen);
	EXPECT_RC(pn_mem_register(s, reg, rlen), 0);
	EXPECT_RC(pn_send_dma(s, NODE_R, CTX_R, TAG_DMA, reg, rlen), 0);
	for (int i = 0; i < 50; i++) {   /* however long it waits: pending, refused */
		EXPECT_RC(pn_mem_deregister(s, reg), -EBUSY);
		EXPECT_RC(pn_dma_free(s, buf), -EBUSY);
		pn_progress(s);
		t_sleep_us(1000);
	}
	CHECK(pn_mem_is_registered(s, reg, rlen) && pn_mem_is_registered(s, buf, len), "a busy region was dropped");
	if (drain(r, s, len + rlen) < 0)
		return -1;
	EXPECT_RC(pn_tx_wait(s), 0);
	EXPECT_RC(pn_mem_deregister(s, reg), 0);
	EXPECT_RC(pn_dma_free(s, buf), 0);
	if (sw)
		munmap(reg, rlen);
	else
		EXPECT_RC(pn_dma_free(s, reg), 0);
	EXPECT_RC(pn_close(s), 0);
	EXPECT_RC(pn_close(r), 0);
	say("ok dereg free and deregister refused with -EBUSY while a %zu-byte send read the memory; "
	    "0 once it was done", len + rlen);
	return 0;
}

int main(int argc, char **argv)
{
	int fails = 0;
	if (argc < 3) {
		fprintf(stderr, "usage: iso_test BACKEND CLUSTER [handover|dereg]\n");
		return 2;
	}
	backend = argv[1];
	cluster = argv[2];
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc < 4 || !strcmp(argv[3], "handover"))
		fails += case_handover() < 0;
	if (argc < 4 || !strcmp(argv[3], "dereg"))
		fails += case_dereg() < 0;
	if (fails)
		return 1;
	say("PASS");
	return 0;
}
