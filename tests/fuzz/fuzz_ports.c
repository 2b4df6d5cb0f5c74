/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The ports layer's packet parsing (ports_wire.h, used by ports_recv.c and ports_shm.c):
 * pw_parse_msg (an EAGER message's first packet), pw_parse_fixed (RTS, the control kinds,
 * PEER-DEAD) and pw_shm_rec_at (the records of an intra-node ring another process
 * writes). The payload is a heap block of exactly the header's length; the ring a block
 * of exactly its size.
 *
 * Input: [mode][flags][payload or ring bytes ...].
 */
#include "fuzz.h"
#include "ports_wire.h"

static void packet(unsigned mode, uint8_t flags, const uint8_t *d, size_t n)
{
	pn_header_t hd;
	uint8_t *pl = fuzz_dup(d, n);
	memset(&hd, 0, sizeof(hd));
	hd.flags = flags;
	hd.length = (uint32_t)n;
	hd.type = PN_TYPE_DATA;
	if (mode == 0) {
		struct pw_msg m;
		if (pw_parse_msg(&hd, pl, &m) == 0) {
			FUZZ_ASSERT(n >= sizeof(m) && m.len <= PN_PORT_EAGER_LIMIT);
			FUZZ_ASSERT(n - sizeof(m) <= m.len);   /* the data never exceeds the message */
			fuzz_touch(pl + sizeof(m), n - sizeof(m));
		} else {
			FUZZ_ASSERT(n < sizeof(m) || m.len > PN_PORT_EAGER_LIMIT || n - sizeof(m) > m.len);
		}
	} else {
		union {
			struct pw_rts r;
			struct pw_ctl c;
			struct pw_dead dd;
		} u;
		size_t want = mode == 1 ? sizeof(u.r) : mode == 2 ? sizeof(u.c) : sizeof(u.dd);
		int r = pw_parse_fixed(&hd, pl, &u, want);
		FUZZ_ASSERT((r == 0) == (n == want && (flags & PN_FLAG_SOM) && (flags & PN_FLAG_EOM)));
	}
	free(pl);
}

/* Walk a ring as pn_shm_next does: every packet's payload inside the data. */
static void ring(const uint8_t *d, size_t n, uint64_t head)
{
	uint64_t size = PW_SHM_ALIGN;
	while (size * 2 <= n && size < (1u << 20))
		size *= 2;
	if (n < size)
		return;
	uint8_t *data = fuzz_dup(d, size);
	uint64_t tail = 0;
	for (unsigned k = 0; k < 256 && tail != head; k++) {
		struct pw_shm_rec rec;
		uint64_t adv, off = tail & (size - 1);
		if (pw_shm_rec_at(data, size, tail, &rec, &adv)) {
			FUZZ_ASSERT(rec.len <= PW_SHM_REC_MAX);
			FUZZ_ASSERT(off + sizeof(rec) + rec.len <= size);
			FUZZ_ASSERT(adv == pw_shm_rec_bytes(rec.len) && adv % PW_SHM_ALIGN == 0);
			fuzz_touch(data + off + sizeof(rec), rec.len);
		} else {
			FUZZ_ASSERT(adv == size - off && adv > 0);
		}
		tail += adv;
		FUZZ_ASSERT(tail % PW_SHM_ALIGN == 0);
	}
	free(data);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *d = data;
	size_t n = size;
	unsigned mode = (unsigned)fuzz_take(&d, &n, 1);
	uint8_t flags = (uint8_t)fuzz_take(&d, &n, 1);
	if (mode % 5 < 4)
		packet(mode % 5, flags, d, n);
	else
		ring(d, n, (uint64_t)flags * PW_SHM_ALIGN * 7);   /* the producer's head: any */
	return 0;
}
