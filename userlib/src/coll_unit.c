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
 *
 * An ALLREDUCE of a job of at most $PARANIC_COLL_A2A_MAX nodes (default
 * PN_COLL_DEFAULT_A2A_MAX, at most PN_COLL_A2A_MAX_NODES; 0: never) goes with the header
 * bit a2a: all-to-all in the kernel, one network crossing instead of the tree's up and
 * down. The choice depends on the job size only, so every node makes the same. (A kernel
 * built before the mode took the bit for a reserved one and runs the tree.)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "coll_int.h"


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

/* Send the command `cmd` (header and dw vector words); its result is awaited by
 * unit_poll until `deadline` (the deadline clock). */
static int unit_send(pn_port_t *p, const uint64_t *cmd, size_t dw)
{
	uint64_t w[2] = {0, 0};
	PN_SET(w, PN_HDR_DST_NODE, p->node);
	PN_SET(w, PN_HDR_DST_CTX, p->ctx);
	PN_SET(w, PN_HDR_TYPE, PN_TYPE_COLLECTIVE);
	PN_SET(w, PN_HDR_LENGTH, 8 * (1 + dw));
	PN_SET(w, PN_HDR_FLAGS, PN_FLAG_SOM | PN_FLAG_EOM);
	p->coll_res_valid = 0;
	p->coll_cmd_hdr = cmd[0];
	p->coll_deadline = pn_deadline_ns(p->h) + p->coll_tmo_ns;
	return pn_pio_raw(p->h, w, cmd, 8 * (1 + dw));
}

/* One look for the result of the command sent: 1 it is in, 0 not yet, -ETIMEDOUT after
 * the collectives' timeout of silence, or a negative errno of the NIC. *n: what the
 * progress round did (for the caller's backoff). */
static int unit_poll(pn_port_t *p, int *n)
{
	int rc;
	if ((*n = pn_port_progress(p)) < 0)
		return *n;
	while (p->coll_res_valid) {
		p->coll_res_valid = 0;
		if (HGET(p->coll_res_hdr, EPISODE) == HGET(p->coll_cmd_hdr, EPISODE))
			return 1;
		p->st.foreign++;   /* a late result of an operation that timed out */
		if ((*n = pn_port_progress(p)) < 0)
			return *n;
	}
	if (pn_deadline_ns(p->h) > p->coll_deadline)
		return -ETIMEDOUT;
	if (!*n && (rc = pn_alive(p->h)) < 0)
		return rc;
	return 0;
}

/* Wait for the result, backing off while nothing happens: 0 or a negative errno. */
static int unit_wait(pn_port_t *p)
{
	struct pn_backoff b = {0};
	uint32_t spins = 0;
	for (;;) {
		int n, rc = unit_poll(p, &n);
		if (rc)
			return rc < 0 ? rc : 0;
		if (!n && (rc = pn_wait_alive(p->h, &spins)) < 0)
			return rc;
		if (n)
			pn_backoff_reset(&b);
		else
			pn_backoff_step(&b);
	}
}

int pn_coll_claim(pn_port_t *p)
{
	uint64_t cmd;
	int rc;
	if (!p)
		return -EINVAL;
	if (p->coll_mode == PT_COLL_HW)
		return 0;
	if (p->coll_mode == PT_COLL_BROKEN)
		return -ENOTRECOVERABLE;
	if (!strcmp(pn_backend_name(p->h), "sw"))
		return -ENODEV;
	if (!p->coll_tmo_ns)
		p->coll_tmo_ns = p->timeout_ns;
	/* An operation of no nodes: the kernel answers it at once (BAD_ARGS, nodata) and
	 * keeps no state; the unit takes this context as its owner unless it has one. */
	cmd = HSET(HSET(HSET(0, OP, PN_COLL_OP_ALLREDUCE), NODES, 0), EPISODE, p->coll_ep);
	if ((rc = unit_send(p, &cmd, 0)) < 0 || (rc = unit_wait(p)) < 0)
		return rc;
	if (HGET(p->coll_res_hdr, REFUSED))
		return -ENODEV;
	p->coll_mode = PT_COLL_HW;
	return 0;
}

/* $PARANIC_COLL_A2A_MAX (0 .. 4096), read once; a bad value: -EINVAL. */
static int a2a_max(pn_port_t *p)
{
	const char *s;
	char *end;
	long v;
	if (p->coll_a2a_read)
		return 0;
	s = getenv("PARANIC_COLL_A2A_MAX");
	v = PN_COLL_DEFAULT_A2A_MAX;
	if (s && *s) {
		errno = 0;
		v = strtol(s, &end, 0);
		if (errno || *end || v < 0 || v > 4096)
			return -EINVAL;
	}
	p->coll_a2a_max = (int)v;
	p->coll_a2a_read = 1;
	return 0;
}

/* The operation goes all-to-all: an ALLREDUCE of a small enough job (every node decides
 * the same). */
static int use_a2a(const pn_port_t *p, uint64_t hdr)
{
	return HGET(hdr, OP) == PN_COLL_OP_ALLREDUCE && p->nodes <= (unsigned)p->coll_a2a_max &&
	       p->nodes <= PN_COLL_A2A_MAX_NODES;
}

/* Post the operation `hdr` (bad: the local checks failed) with the vector `in`. */
static int unit_post(pn_port_t *p, uint64_t hdr, int bad, const void *in, size_t nbytes)
{
	uint64_t cmd[1 + PN_COLL_MAX_WORDS];
	size_t dw = bad ? 0 : (nbytes + 7) / 8;
	int rc;

	if ((rc = a2a_max(p)) < 0)
		return rc;
	hdr = HSET(hdr, A2A, use_a2a(p, hdr));

	/* A bad call still takes part (so nobody waits for it), as a header with BAD_ARGS. */
	if (bad) {
		hdr = HSET(HSET(hdr, ERR, PN_COLL_ERR_BAD_ARGS), NBYTES, 0);
		if (HGET(hdr, ROOT) >= p->nodes)   /* else the kernel would answer at once, alone */
			hdr = HSET(hdr, ROOT, 0);
	}
	cmd[0] = HSET(hdr, PHASE, PN_COLL_PHASE_UP);
	if (dw) {
		cmd[dw] = 0;   /* a 4-byte tail is zero-padded */
		if (in)
			memcpy(&cmd[1], in, nbytes);
	}
	p->coll_nbytes = bad ? 0 : nbytes;
	return unit_send(p, cmd, dw);
}

/* The result that came for the posted operation (rc: unit_wait's or unit_poll's). */
static int unit_finish(pn_port_t *p, int rc, void *out)
{
	uint64_t cmd = p->coll_cmd_hdr;
	unsigned op = (unsigned)HGET(cmd, OP), root = (unsigned)HGET(cmd, ROOT);
	size_t nbytes = p->coll_nbytes;
	if (rc < 0) {
		/* The kernel may hold part of this operation: nothing more can go through it
		 * until the context is opened again (which resets the unit). */
		if (rc == -ETIMEDOUT)
			p->coll_mode = PT_COLL_BROKEN;
		return rc;
	}
	if (HGET(p->coll_res_hdr, REFUSED))
		return -ENODEV;
	if (HGET(cmd, ERR) || (HGET(p->coll_res_hdr, ERR) & PN_COLL_ERR_BAD_ARGS))
		return -EINVAL;
	/* Nodes that disagree on the root or the op build different trees: a node may then be
	 * handed another tree's result (or wait in vain: -ETIMEDOUT above). */
	if (HGET(p->coll_res_hdr, ERR) || HKEY(p->coll_res_hdr) != HKEY(cmd))
		return -EBADMSG;
	if (HGET(p->coll_res_hdr, NODATA))   /* a REDUCE's completion at a node that is not the root */
		return op == PN_COLL_OP_REDUCE && p->node != root ? 0 : -EPROTO;
	if (p->coll_res_bytes != 8 * ((nbytes + 7) / 8))
		return -EPROTO;
	if (nbytes && (op != PN_COLL_OP_REDUCE || p->node == root))
		memcpy(out, p->coll_res, nbytes);
	return 0;
}

int pt_coll_unit_run(pn_port_t *p, uint64_t hdr, int bad, const void *in, void *out, size_t nbytes)
{
	int rc = unit_post(p, hdr, bad, in, nbytes);
	if (rc < 0)
		return rc;
	return unit_finish(p, unit_wait(p), out);
}

int pn_coll_start(pn_port_t *p, int op, unsigned root, const void *in, size_t nbytes, int dtype, int red)
{
	uint64_t hdr;
	int bad, rc;
	if (!p || op < 0 || op > PN_COLL_OP_BCAST)
		return -EINVAL;
	if (p->coll_busy)
		return -EBUSY;
	if (p->coll_mode != PT_COLL_HW)
		return p->coll_mode == PT_COLL_BROKEN ? -ENOTRECOVERABLE : -ENODEV;
	hdr = pt_coll_header(p, op, root, in, in, nbytes, dtype, red, p->coll_ep++, &bad);
	if ((rc = unit_post(p, hdr, bad, in, nbytes)) < 0)
		return rc;
	p->coll_busy = 1;
	return 0;
}

int pn_coll_test(pn_port_t *p, void *out)
{
	int n, rc;
	if (!p || !p->coll_busy)
		return -EINVAL;
	if ((rc = unit_poll(p, &n)) == 0)
		return 0;
	p->coll_busy = 0;
	rc = unit_finish(p, rc, out);
	return rc < 0 ? rc : 1;
}
