/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Collectives on the NIC's collective unit (pn_coll.h; the kernel: hls/collective,
 * the unit: hw/collective.py, docs/hls.md).
 *
 * A call is one command to this node's unit: a PIO packet of type COLLECTIVE whose
 * payload is the kernel's header word (COLL_FIELDS) and the vector. The unit combines it
 * with the other nodes' in the network and answers with one result packet in this
 * context's RX ring: the header word (phase DOWN, err, refused) and, unless nodata, the
 * vector. The ports layer's receive loop hands such packets here (pt_coll_result);
 * everything else it receives meanwhile goes on as usual.
 *
 * A command from a context the unit is not configured for comes back at once with
 * `refused` set: -ENODEV, and coll.c uses the software path instead (PARANIC_COLL).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "paranic/pn_coll.h"
#include "ports_int.h"

#define HGET(w, F) (((w) >> PN_COLLHDR_##F##_SHIFT) & PN_COLLHDR_##F##_MASK)
#define HSET(w, F, v) \
	(((w) & ~(PN_COLLHDR_##F##_MASK << PN_COLLHDR_##F##_SHIFT)) | \
	 (((uint64_t)(v) & PN_COLLHDR_##F##_MASK) << PN_COLLHDR_##F##_SHIFT))
#define HFIELD(w, F) ((w) & (PN_COLLHDR_##F##_MASK << PN_COLLHDR_##F##_SHIFT))
/* The fields a result shares with the command it answers. */
#define HKEY(w) (HFIELD(w, OP) | HFIELD(w, DTYPE) | HFIELD(w, RED) | HFIELD(w, NBYTES) | HFIELD(w, ROOT) | \
		 HFIELD(w, NODES) | HFIELD(w, EPISODE))

void pt_coll_result(pn_port_t *p, const pn_header_t *hd, const void *pl)
{
	size_t len = hd->length;
	if (!pl || len < 8 || len > 8 + PN_COLL_MAX_BYTES || (len & 7)) {
		p->st.foreign++;
		return;
	}
	memcpy(&p->coll_res_hdr, pl, 8);
	memcpy(p->coll_res, (const uint8_t *)pl + 8, len - 8);
	p->coll_res_bytes = len - 8;
	p->coll_res_valid = 1;
}

/* Wait for the result of episode ep: 0, -ETIMEDOUT after the collectives' timeout of
 * silence (the deadline clock), or a negative errno of the NIC. */
static int unit_wait(pn_port_t *p, uint16_t ep)
{
	uint64_t deadline = pn_deadline_ns(p->h) + p->coll_tmo_ns;
	struct pn_backoff b = {0};
	uint32_t spins = 0;
	for (;;) {
		int rc, n = pn_port_progress(p);
		if (n < 0)
			return n;
		if (p->coll_res_valid) {
			p->coll_res_valid = 0;
			if (HGET(p->coll_res_hdr, EPISODE) == ep)
				return 0;
			p->st.foreign++;   /* a late result of an operation that timed out */
			continue;
		}
		if (!n && (rc = pn_wait_alive(p->h, &spins)) < 0)
			return rc;
		if (n)
			pn_backoff_reset(&b);
		else
			pn_backoff_step(&b);
		if (pn_deadline_ns(p->h) > deadline)
			return -ETIMEDOUT;
	}
}

int pt_coll_unit_run(pn_port_t *p, uint64_t hdr, int bad, const void *in, void *out, size_t nbytes)
{
	uint64_t w[2] = {0, 0};
	uint64_t cmd[1 + PN_COLL_MAX_WORDS];
	unsigned op = (unsigned)HGET(hdr, OP), root = (unsigned)HGET(hdr, ROOT);
	uint16_t ep = (uint16_t)HGET(hdr, EPISODE);
	size_t dw = bad ? 0 : (nbytes + 7) / 8;
	int rc;

	/* A bad call still takes part (so nobody waits for it), as a header with BAD_ARGS. */
	if (bad) {
		hdr = HSET(HSET(hdr, ERR, PN_COLL_ERR_BAD_ARGS), NBYTES, 0);
		if (root >= p->nodes)   /* else the kernel would answer at once, alone */
			hdr = HSET(hdr, ROOT, 0);
	}
	cmd[0] = HSET(hdr, PHASE, PN_COLL_PHASE_UP);
	if (dw) {
		cmd[dw] = 0;   /* a 4-byte tail is zero-padded */
		if (in)
			memcpy(&cmd[1], in, nbytes);
	}
	PN_SET(w, PN_HDR_DST_NODE, p->node);
	PN_SET(w, PN_HDR_DST_CTX, p->ctx);
	PN_SET(w, PN_HDR_TYPE, PN_TYPE_COLLECTIVE);
	PN_SET(w, PN_HDR_LENGTH, 8 * (1 + dw));
	PN_SET(w, PN_HDR_FLAGS, PN_FLAG_SOM | PN_FLAG_EOM);
	p->coll_res_valid = 0;
	if ((rc = pn_pio_raw(p->h, w, cmd, 8 * (1 + dw))) < 0)
		return rc;
	if ((rc = unit_wait(p, ep)) < 0) {
		/* The kernel may hold part of this operation: nothing more can go through it
		 * until the context is opened again (which resets the unit). */
		if (rc == -ETIMEDOUT)
			p->coll_mode = PT_COLL_BROKEN;
		return rc;
	}
	if (HGET(p->coll_res_hdr, REFUSED))
		return -ENODEV;
	if (bad || (HGET(p->coll_res_hdr, ERR) & PN_COLL_ERR_BAD_ARGS))
		return -EINVAL;
	/* Nodes that disagree on the root or the op build different trees: a node may then be
	 * handed another tree's result (or wait in vain: -ETIMEDOUT above). */
	if (HGET(p->coll_res_hdr, ERR) || HKEY(p->coll_res_hdr) != HKEY(cmd[0]))
		return -EBADMSG;
	if (HGET(p->coll_res_hdr, NODATA)) {
		/* a REDUCE's completion at a node that is not the root */
		return op == PN_COLL_OP_REDUCE && p->node != root ? 0 : -EPROTO;
	}
	if (p->coll_res_bytes != 8 * dw)
		return -EPROTO;
	if (nbytes && (op != PN_COLL_OP_REDUCE || p->node == root))
		memcpy(out, p->coll_res, nbytes);
	return 0;
}
