/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The RX ring as the library reads it (hal_recv.c): the real pn_recv_header,
 * pn_recv_payload, pn_recv_body and pn_recv_skip over a ring whose every byte comes from
 * the input, on a HAL whose backend only records RX_HEAD doorbells. Every header handed
 * out must be one the NIC could have written (length <= MTU, a known type) and exactly what
 * the slot holds (a broken record is refused and skipped, never mended into another
 * packet), its payload must lie inside its slot, and the HAL must stop at the first slot
 * not yet written.
 *
 * Input: [mtu selector][ring log2 selector][batch][ring bytes ...] (zeros after the end).
 */
#include "fuzz.h"
#include "hal_int.h"

static uint32_t last_head;

static void fz_write32(pn_hal_t *h, uint32_t off, uint32_t v)
{
	(void)h;
	FUZZ_ASSERT(off == PN_REG_RX_HEAD);
	last_head = v;
}

static const struct pn_backend_ops fuzz_ops = {.name = "fuzz", .mmio_write32 = fz_write32};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const uint32_t mtus[] = {8, 64, 256, 1024, 4096, PN_MAX_MTU};
	const uint8_t *d = data;
	size_t n = size;
	uint32_t mtu = mtus[fuzz_take(&d, &n, 1) % 6];
	uint32_t slots = 1u << (1 + fuzz_take(&d, &n, 1) % 4);   /* 2 .. 16 */
	uint32_t batch = 1 + (uint32_t)fuzz_take(&d, &n, 1) % 8;
	uint32_t slot_bytes = PN_RX_SLOT_BYTES(mtu);
	size_t ring_bytes = (size_t)slots * slot_bytes;
	uint8_t *ring = calloc(1, ring_bytes);
	uint8_t *body = NULL;
	struct pn_hal h;
	pn_header_t hd;
	unsigned got = 0;

	if (!ring)
		abort();
	memcpy(ring, d, n < ring_bytes ? n : ring_bytes);
	memset(&h, 0, sizeof(h));
	h.magic = PN_HAL_MAGIC;   /* an open handle */
	h.ops = &fuzz_ops;
	h.map.rx_ring = ring;
	h.map.rx_slots = slots;
	h.map.rx_slot_bytes = slot_bytes;
	h.map.mtu = mtu;
	h.rx_mask = slots - 1;
	h.rx_batch = batch;
	h.daemon_fd = -1;
	last_head = 0;

	for (unsigned k = 0; k < 4 * slots; k++) {
		uint64_t before = h.rx_next;
		int r = pn_recv_header(&h, &hd);
		const void *pl = NULL;
		FUZZ_ASSERT(r == 0 || r == 1);
		if (r == 0)
			break;
		got++;
		FUZZ_ASSERT(hd.length <= mtu && hd.type <= PN_TYPE_RMA_RESP);
		{	/* exactly what the NIC wrote in the slot: a broken record is refused, never mended */
			uint64_t w[2];
			memcpy(w, (const void *)(uintptr_t)h.cur_slot, sizeof(w));
			FUZZ_ASSERT(hd.length == PN_GET(w, PN_HDR_LENGTH) && hd.type == PN_GET(w, PN_HDR_TYPE) &&
				    hd.tag == PN_GET(w, PN_HDR_TAG));
		}
		FUZZ_ASSERT(h.rx_next >= before);   /* refused records were skipped, never re-read */
		FUZZ_ASSERT(pn_recv_payload(&h, &pl) == (int)hd.length);
		FUZZ_ASSERT((const uint8_t *)pl >= ring &&
			    (const uint8_t *)pl + hd.length <= ring + ring_bytes);
		fuzz_touch(pl, hd.length);
		switch (k % 3) {
		case 0:
			body = malloc(hd.length ? hd.length : 1);
			FUZZ_ASSERT(body);
			FUZZ_ASSERT(pn_recv_body(&h, body, hd.length) == (int)hd.length);
			free(body);
			break;
		case 1:
			if (hd.length)
				FUZZ_ASSERT(pn_recv_body(&h, NULL, hd.length - 1) == -EMSGSIZE);
			FUZZ_ASSERT(pn_recv_skip(&h) == (int)hd.length);
			break;
		default:
			FUZZ_ASSERT(pn_recv_skip(&h) == (int)hd.length);
		}
		FUZZ_ASSERT(pn_recv_skip(&h) == -ENOENT);
	}
	FUZZ_ASSERT(h.recv_packets == got);
	FUZZ_ASSERT(last_head <= (uint32_t)h.rx_next);
	free(ring);
	return 0;
}
