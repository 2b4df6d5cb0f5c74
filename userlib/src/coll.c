/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Collectives (pn_coll.h): the choice of path (the NIC's collective unit, coll_unit.c,
 * or software), and the software path over ports: the path of a context without a
 * collective unit, and the baseline `paranic bench collective` measures.
 *
 * One operation (an "episode": every node counts its calls the same) runs in one or
 * two rounds over the combining tree of the spec (pn_coll_spec.h, the implicit 4-ary
 * heap over relative ids), every message on channel PN_COLL_CHANNEL with the tag
 * (episode << 8 | kind) and beginning with the kernel's header word (COLL_FIELDS):
 *
 *   round 1, the tree rooted at node 0: UP1 (each node's header, ORing the err bits
 *     and MISMATCH where a child disagrees with its parent on op, dtype, red, nbytes,
 *     root, nodes or episode), then DOWN1 from node 0 (the verdict: err). Any two
 *     nodes that disagree are joined by a tree path, so some edge sees it, whatever
 *     they think the root is. When the root is 0 (ALLREDUCE always, REDUCE/BCAST with
 *     root 0) the data ride along: UP1 carries the partial sums, combined in the
 *     kernel's order (own, then children by increasing relative id), and DOWN1 the
 *     root's result (ALLREDUCE) or vector (BCAST): one round trip in all.
 *   round 2, only for REDUCE/BCAST with root != 0 and a clean verdict: the same tree
 *     rooted at `root` (so the reduction order is the kernel's for that root): UP2
 *     with the partial results (REDUCE), or DOWN2 with the root's vector (BCAST).
 *
 * Failures: a node whose wait for a neighbour passes the timeout of silence
 * ($PARANIC_COLL_TIMEOUT_MS, else the port's timeout),
 * or whose ports operation fails, sends ABORT (a zero-length message whose immediate
 * data is the errno) to its neighbours in both trees; every node listens for ABORT
 * during the whole operation and passes it on, so every node still waiting ends with
 * the first node's error and nobody waits for ever. Messages of a failed episode that
 * arrive later are drained by the next few operations.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "coll_int.h"

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the collective header and vectors are little-endian on the wire"
#endif

#define LG PN_COLL_DEFAULT_RADIX_LOG2
#define FANOUT (1u << LG)
#define HDR_BYTES 8
#define MSG_MAX (HDR_BYTES + PN_COLL_MAX_BYTES)
#define MSG_WORDS (MSG_MAX / 8)
#define TAG_MASK 0xffffffULL
#define DRAIN_EPISODES 16
#define MAX_SENDS (4 * (FANOUT + 1))

enum { K_UP1 = 1, K_DOWN1, K_UP2, K_DOWN2, K_ABORT };


struct coll {
	pn_port_t *p;
	uint64_t tmo;              /* silence allowed while waiting for a neighbour (ns) */
	unsigned me, n;
	uint16_t ep;
	uint64_t hdr;              /* own header (phase UP, err of the local check) */
	int dtype, red;
	size_t nbytes;
	pn_port_req_t *abort_rq;   /* the posted ABORT receive */
	pn_port_status_t abort_st;
	int aborted_by;            /* the node whose ABORT ended us, -1 */
	pn_port_req_t *sreq[MAX_SENDS];
	unsigned nsreq;
	pn_port_req_t *rreq[FANOUT + 1];   /* receives in flight of the current step */
	uint64_t cbuf[FANOUT][MSG_WORDS];  /* the children's UP messages */
	uint64_t dmsg[MSG_WORDS];          /* the DOWN message (received or built), forwarded */
	size_t dlen;
	uint64_t up[MSG_WORDS];            /* the UP message to the parent: header + partial */
	uint64_t abort_nil;
};

static uint64_t tag_of(uint16_t ep, unsigned kind)
{
	return ((uint64_t)ep << 8) | kind;
}

static unsigned node_of(const struct coll *c, unsigned rel, unsigned troot)
{
	return (rel + troot) % c->n;
}

static unsigned rel_of(const struct coll *c, unsigned troot)
{
	return (c->me + c->n - troot) % c->n;
}

/* The children of rel (relative ids), in combining order; their count. */
static unsigned children(const struct coll *c, unsigned rel, unsigned out[FANOUT])
{
	unsigned k = 0, first = PN_COLL_FIRST_CHILD(rel, LG);
	for (unsigned i = 0; i < FANOUT; i++)
		if (first + i < c->n)
			out[k++] = first + i;
	return k;
}

/* ---- combining: acc = acc (op) b, element-wise, as the kernel (combine_ref) ---------- */

#define COMBINE(T, UT, INT)                                                       \
	do {                                                                      \
		T *a = acc;                                                       \
		const T *x = b;                                                   \
		for (size_t i = 0; i < nbytes / sizeof(T); i++) {                 \
			switch (red) {                                            \
			case PN_COLL_RED_SUM:                                     \
				if (INT)                                          \
					a[i] = (T)((UT)a[i] + (UT)x[i]);          \
				else                                              \
					a[i] = a[i] + x[i];                       \
				break;                                            \
			case PN_COLL_RED_MIN: a[i] = x[i] < a[i] ? x[i] : a[i]; break;   \
			case PN_COLL_RED_MAX: a[i] = x[i] > a[i] ? x[i] : a[i]; break;   \
			}                                                         \
		}                                                                 \
	} while (0)

/* A float sum that is a NaN becomes the canonical NaN, as in the kernel (the payload of
 * a NaN sum would otherwise be the compiler's choice of operand order). */
#define CANONICAL_NANS(T, W, QNAN)                                 \
	do {                                                       \
		W *w = acc;                                        \
		for (size_t i = 0; i < nbytes / sizeof(W); i++) {  \
			T f;                                       \
			memcpy(&f, &w[i], sizeof(f));              \
			if (f != f)                                \
				w[i] = QNAN;                       \
		}                                                  \
	} while (0)

static void canonical_nans(void *acc, size_t nbytes, int dtype)
{
	if (dtype == PN_COLL_T_F32)
		CANONICAL_NANS(float, uint32_t, PN_COLL_F32_QNAN);
	else
		CANONICAL_NANS(double, uint64_t, PN_COLL_F64_QNAN);
}

static void combine(void *acc, const void *b, size_t nbytes, int dtype, int red)
{
	if (red == PN_COLL_RED_AND || red == PN_COLL_RED_OR) {   /* integers only (checked) */
		uint8_t *a = acc;
		const uint8_t *x = b;
		for (size_t i = 0; i < nbytes; i++)
			a[i] = red == PN_COLL_RED_AND ? (a[i] & x[i]) : (a[i] | x[i]);
		return;
	}
	switch (dtype) {
	case PN_COLL_T_I32: COMBINE(int32_t, uint32_t, 1); break;
	case PN_COLL_T_I64: COMBINE(int64_t, uint64_t, 1); break;
	case PN_COLL_T_F32: COMBINE(float, float, 0); break;
	case PN_COLL_T_F64: COMBINE(double, double, 0); break;
	}
	if (red == PN_COLL_RED_SUM && (dtype == PN_COLL_T_F32 || dtype == PN_COLL_T_F64))
		canonical_nans(acc, nbytes, dtype);
}

/* ---- messages ---------------------------------------------------------------------------- */

static int csend(struct coll *c, unsigned node, unsigned kind, const void *buf, size_t len, uint32_t data,
		 unsigned flags)
{
	pn_port_req_t *rq = NULL;
	int rc;
	if (c->nsreq == MAX_SENDS)
		return -ENOBUFS;
	rc = pn_port_isendx(c->p, node, c->p->ctx, PN_COLL_CHANNEL, tag_of(c->ep, kind), buf, len, data, flags, &rq);
	if (rc < 0)
		return rc;
	c->sreq[c->nsreq++] = rq;
	return 0;
}

static int crecv(struct coll *c, unsigned node, unsigned kind, void *buf, pn_port_req_t **rq)
{
	return pn_port_irecv(c->p, (int)node, (int)c->p->ctx, PN_COLL_CHANNEL, tag_of(c->ep, kind), TAG_MASK, buf,
			     MSG_MAX, rq);
}

/* Wait for *rq: 1 and *st when it completed; a negative errno when it failed, an ABORT
 * came (its errno; aborted_by says from whom), or the neighbour was silent too long. */
static int cwait(struct coll *c, pn_port_req_t **rq, pn_port_status_t *st)
{
	/* the clock of the library's deadlines: on sim, the simulator's work clock */
	uint64_t deadline = pn_deadline_ns(c->p->h) + c->tmo;
	struct pn_backoff b = {0};
	uint32_t spins = 0;
	for (;;) {
		/* progress, as pn_port_wait: backing off (yield, then short sleeps) while
		 * nothing happens, so the waiting processes leave the CPU to the others */
		int rc, n = pn_port_progress(c->p);
		if (n < 0)
			return n;
		if (pn_port_done(*rq) == 1)
			return pn_port_test(c->p, rq, st);
		if (!n && (rc = pn_wait_alive(c->p->h, &spins)) < 0)
			return rc;
		if (n)
			pn_backoff_reset(&b);
		else
			pn_backoff_step(&b);
		if (c->abort_rq && pn_port_done(c->abort_rq) == 1) {
			rc = pn_port_test(c->p, &c->abort_rq, &c->abort_st);
			if (rc == 1) {
				c->aborted_by = c->abort_st.src_node;
				rc = (c->abort_st.flags & PN_PORT_DATA) && c->abort_st.data ? -(int)c->abort_st.data
											     : -ECONNABORTED;
			}
			return rc;
		}
		if (pn_deadline_ns(c->p->h) > deadline)
			return -ETIMEDOUT;
	}
}

/* End a receive that is still in flight: withdraw it, or let it finish (a message that
 * matched is received whole within the liveness timeout), or collect its completion. */
static void rdone(struct coll *c, pn_port_req_t **rq)
{
	int rc;
	if (!*rq)
		return;
	rc = pn_port_cancel(c->p, rq);
	if (rc == -EBUSY)
		pn_port_wait(c->p, rq, NULL, -1);
	else if (rc == -EALREADY)
		pn_port_test(c->p, rq, NULL);
	*rq = NULL;
}

/* End a send before its buffer (in struct coll, on the caller's stack) goes away. An
 * eager send copies its data when it starts and is done then; one still queued behind
 * credits gets up to the timeout, then is withdrawn. Only a started rendezvous (no DMA
 * memory for an eager slot) still reads the buffer: wait for it to end (the port's
 * liveness ends it when its peer is gone). */
static void sdone(struct coll *c, pn_port_req_t **rq)
{
	int rc;
	if (!*rq || pn_port_wait(c->p, rq, NULL, (int64_t)c->tmo) != -ETIMEDOUT)
		return;
	rc = pn_port_cancel(c->p, rq);
	if (rc == -EBUSY)
		pn_port_wait(c->p, rq, NULL, -1);
	else if (rc == -EALREADY)
		pn_port_test(c->p, rq, NULL);
	*rq = NULL;
}

/* Tell every tree neighbour (both trees) that the operation failed with err. */
static void abort_all(struct coll *c, int err, unsigned troot2)
{
	unsigned roots[2] = {0, troot2}, sent[2 * (FANOUT + 1)], ns = 0;
	for (unsigned t = 0; t < 2; t++) {
		unsigned rel = rel_of(c, roots[t]), ch[FANOUT], k = children(c, rel, ch), nb[FANOUT + 1], m = 0;
		if (rel)
			nb[m++] = node_of(c, PN_COLL_PARENT(rel, LG), roots[t]);
		for (unsigned i = 0; i < k; i++)
			nb[m++] = node_of(c, ch[i], roots[t]);
		for (unsigned i = 0; i < m; i++) {
			int dup = (int)nb[i] == c->aborted_by;
			for (unsigned j = 0; j < ns; j++)
				dup |= sent[j] == nb[i];
			if (dup)
				continue;
			sent[ns++] = nb[i];
			csend(c, nb[i], K_ABORT, NULL, 0, (uint32_t)-err, PN_PORT_DATA);
		}
	}
}

/* Drain the messages failed episodes left behind (only after a failure). */
static void drain(pn_port_t *p, uint16_t ep)
{
	uint64_t scratch[MSG_WORDS];
	pn_port_status_t st;
	for (unsigned d = 1; d <= DRAIN_EPISODES; d++)
		for (unsigned k = K_UP1; k <= K_ABORT; k++)
			while (pn_port_probe(p, PN_PORT_ANY, PN_PORT_ANY, PN_COLL_CHANNEL, tag_of((uint16_t)(ep - d), k),
					     TAG_MASK, &st) == 1 &&
			       pn_port_recv(p, st.src_node, st.src_ctx, PN_COLL_CHANNEL, st.tag, TAG_MASK, scratch,
					    sizeof(scratch), NULL, 0) >= 0)
				;
	p->coll_dirty--;
}

/* ---- the two phases ---------------------------------------------------------------------- */

/* UP over the tree rooted at troot: combine own (acc, when with_data) and the children's
 * partials in order, send the result to the parent. Returns the err bits gathered, or a
 * negative errno. */
static int phase_up(struct coll *c, unsigned troot, unsigned kind, uint64_t *acc, int with_data, unsigned err)
{
	unsigned rel = rel_of(c, troot), ch[FANOUT], k = children(c, rel, ch);
	pn_port_status_t st;
	int rc;
	for (unsigned i = 0; i < k; i++)
		if ((rc = crecv(c, node_of(c, ch[i], troot), kind, c->cbuf[i], &c->rreq[i])) < 0)
			return rc;
	for (unsigned i = 0; i < k; i++) {
		uint64_t h;
		rc = cwait(c, &c->rreq[i], &st);
		if (rc < 0)
			return rc;
		h = c->cbuf[i][0];
		if (st.len < HDR_BYTES) {
			err |= PN_COLL_ERR_MISMATCH;
			continue;
		}
		err |= (unsigned)HGET(h, ERR);   /* carried even from a disagreeing child */
		if (HKEY(h) != HKEY(c->hdr)) {
			err |= PN_COLL_ERR_MISMATCH;
			continue;
		}
		if (!with_data || err)
			continue;
		if (st.len != HDR_BYTES + c->nbytes) {
			err |= PN_COLL_ERR_MISMATCH;
			continue;
		}
		combine(acc, &c->cbuf[i][1], c->nbytes, c->dtype, c->red);
	}
	if (rel) {
		size_t len = HDR_BYTES + (with_data && !err ? c->nbytes : 0);
		c->up[0] = HSET(HSET(c->hdr, PHASE, PN_COLL_PHASE_UP), ERR, err);
		if (len > HDR_BYTES)
			memcpy(&c->up[1], acc, c->nbytes);
		if ((rc = csend(c, node_of(c, PN_COLL_PARENT(rel, LG), troot), kind, c->up, len, 0, 0)) < 0)
			return rc;
	}
	return (int)err;
}

/* DOWN over the tree rooted at troot: the root's dmsg/dlen are set by the caller; the
 * others receive them from the parent. Then forward to the children. */
static int phase_down(struct coll *c, unsigned troot, unsigned kind)
{
	unsigned rel = rel_of(c, troot), ch[FANOUT], k = children(c, rel, ch);
	pn_port_status_t st;
	int rc;
	if (rel) {
		if ((rc = crecv(c, node_of(c, PN_COLL_PARENT(rel, LG), troot), kind, c->dmsg, &c->rreq[0])) < 0)
			return rc;
		if ((rc = cwait(c, &c->rreq[0], &st)) < 0)
			return rc;
		if (st.len < HDR_BYTES)
			return -EPROTO;
		c->dlen = st.len;
	}
	for (unsigned i = 0; i < k; i++)
		if ((rc = csend(c, node_of(c, ch[i], troot), kind, c->dmsg, c->dlen, 0, 0)) < 0)
			return rc;
	return 0;
}

/* ---- one operation ----------------------------------------------------------------------- */

static int coll_bad(const pn_port_t *p, int op, unsigned root, const void *in, const void *out, size_t nbytes,
		    int dtype, int red)
{
	size_t esz;
	if (dtype < 0 || dtype > PN_COLL_T_F64 || red < 0 || red > PN_COLL_RED_OR)
		return 1;
	esz = PN_COLL_TYPE_BYTES(dtype);
	if (nbytes > PN_COLL_MAX_BYTES || nbytes % esz || root >= p->nodes)
		return 1;
	if (op != PN_COLL_OP_BCAST && (red == PN_COLL_RED_AND || red == PN_COLL_RED_OR) &&
	    (dtype == PN_COLL_T_F32 || dtype == PN_COLL_T_F64))
		return 1;
	if (nbytes && !in && (op != PN_COLL_OP_BCAST || p->node == root))
		return 1;
	if (nbytes && !out && (op == PN_COLL_OP_ALLREDUCE || op == PN_COLL_OP_BCAST || p->node == root))
		return 1;
	return 0;
}

/* The silence a wait allows: $PARANIC_COLL_TIMEOUT_MS (1 .. 3600000), else the port's
 * timeout; read at the first operation. -EINVAL for a bad value. */
static int coll_timeout(pn_port_t *p)
{
	const char *s;
	char *end;
	long v;
	if (p->coll_tmo_ns)
		return 0;
	s = getenv("PARANIC_COLL_TIMEOUT_MS");
	if (!s || !*s) {
		p->coll_tmo_ns = p->timeout_ns;
		return 0;
	}
	errno = 0;
	v = strtol(s, &end, 0);
	if (errno || *end || v < 1 || v > 3600000)
		return -EINVAL;
	p->coll_tmo_ns = (uint64_t)v * 1000000ull;
	return 0;
}

/* The path of this port's collectives, from $PARANIC_COLL (auto, hw, sw): the software
 * backend has no unit, so auto means software there and hw fails. -EINVAL: a bad value. */
static int coll_mode(pn_port_t *p)
{
	const char *s = getenv("PARANIC_COLL");
	int sw_backend = strcmp(pn_backend_name(p->h), "sw") == 0;
	if (!s || !*s || !strcmp(s, "auto"))
		p->coll_mode = sw_backend ? PT_COLL_SW : PT_COLL_AUTO;
	else if (!strcmp(s, "hw"))
		p->coll_mode = sw_backend ? PT_COLL_BROKEN : PT_COLL_HW;
	else if (!strcmp(s, "sw"))
		p->coll_mode = PT_COLL_SW;
	else
		return -EINVAL;
	if (p->coll_mode == PT_COLL_BROKEN) {
		p->coll_mode = 0;
		return -ENODEV;
	}
	return 0;
}

uint64_t pt_coll_header(const pn_port_t *p, int op, unsigned root, const void *in, const void *out, size_t nbytes,
			int dtype, int red, uint16_t ep, int *bad)
{
	uint64_t h = 0;
	*bad = coll_bad(p, op, root, in, out, nbytes, dtype, red);
	if (op == PN_COLL_OP_ALLREDUCE)
		root = 0;   /* the kernel's field is "any, the same on every node" */
	if (op == PN_COLL_OP_BCAST)
		red = 0;    /* ignored by BCAST */
	h = HSET(h, OP, op);
	h = HSET(h, DTYPE, dtype & (int)PN_COLLHDR_DTYPE_MASK);
	h = HSET(h, RED, red & (int)PN_COLLHDR_RED_MASK);
	h = HSET(h, NBYTES, nbytes);
	h = HSET(h, ROOT, root);
	h = HSET(h, NODES, p->nodes);
	return HSET(h, EPISODE, ep);
}

static int coll_run(pn_port_t *p, int op, unsigned root, const void *in, void *out, size_t nbytes, int dtype,
		    int red)
{
	struct coll c;
	uint64_t acc[PN_COLL_MAX_WORDS];
	int bad, piggy, rc, ret;
	unsigned err;

	if (!p)
		return -EINVAL;
	if ((rc = coll_timeout(p)) < 0)
		return rc;
	memset(&c, 0, sizeof(c));
	c.p = p;
	c.tmo = p->coll_tmo_ns;
	c.me = p->node;
	c.n = p->nodes;
	c.ep = p->coll_ep++;
	c.aborted_by = -1;
	if (p->coll_dirty)
		drain(p, c.ep);
	c.hdr = pt_coll_header(p, op, root, in, out, nbytes, dtype, red, c.ep, &bad);
	c.dtype = (int)HGET(c.hdr, DTYPE);
	c.red = (int)HGET(c.hdr, RED);
	c.nbytes = bad ? 0 : nbytes;
	root = (unsigned)HGET(c.hdr, ROOT);
	err = bad ? PN_COLL_ERR_BAD_ARGS : 0;
	piggy = !bad && root == 0;

	if (!p->coll_mode && (rc = coll_mode(p)) < 0)
		return rc;
	if (p->coll_mode == PT_COLL_BROKEN)
		return -ENOTRECOVERABLE;
	if (p->coll_mode == PT_COLL_AUTO || p->coll_mode == PT_COLL_HW) {
		rc = pt_coll_unit_run(p, c.hdr, bad, in, out, nbytes);
		if (rc != -ENODEV || p->coll_mode == PT_COLL_HW) {
			if (p->coll_mode == PT_COLL_AUTO && rc != -ENODEV)
				p->coll_mode = PT_COLL_HW;
			return rc;
		}
		p->coll_mode = PT_COLL_SW;   /* refused: this context has no unit */
	}

	rc = pn_port_irecv(p, PN_PORT_ANY, (int)p->ctx, PN_COLL_CHANNEL, tag_of(c.ep, K_ABORT), TAG_MASK, &c.abort_nil, 0,
			   &c.abort_rq);
	if (rc < 0)
		return rc;

	/* round 1: agreement (and the data, when the root is 0) over the tree rooted at 0 */
	if (piggy && op != PN_COLL_OP_BCAST)
		memcpy(acc, in, nbytes);
	rc = phase_up(&c, 0, K_UP1, acc, piggy && op != PN_COLL_OP_BCAST, err);
	if (rc < 0)
		goto fail;
	err = (unsigned)rc;
	if (c.me == 0) {
		c.dmsg[0] = HSET(HSET(c.hdr, PHASE, PN_COLL_PHASE_DOWN), ERR, err);
		c.dlen = HDR_BYTES;
		if (!err && piggy && op != PN_COLL_OP_REDUCE) {
			memcpy(&c.dmsg[1], op == PN_COLL_OP_ALLREDUCE ? (const void *)acc : in, nbytes);
			c.dlen += nbytes;
		} else {
			c.dmsg[0] = HSET(c.dmsg[0], NODATA, 1);
		}
	}
	if ((rc = phase_down(&c, 0, K_DOWN1)) < 0)
		goto fail;
	err = (unsigned)HGET(c.dmsg[0], ERR);
	if (bad || (err & PN_COLL_ERR_BAD_ARGS)) {
		ret = -EINVAL;
	} else if (err) {
		ret = -EBADMSG;
	} else if (piggy) {
		ret = 0;
		if (op != PN_COLL_OP_REDUCE && c.dlen != HDR_BYTES + nbytes)
			ret = -EPROTO;
		else if (op == PN_COLL_OP_ALLREDUCE || (op == PN_COLL_OP_BCAST && c.me != 0))
			memcpy(out, &c.dmsg[1], nbytes);
		else if (op == PN_COLL_OP_REDUCE && c.me == 0)
			memcpy(out, acc, nbytes);
	} else if (op == PN_COLL_OP_REDUCE) {
		/* round 2: the reduction over the tree rooted at root */
		memcpy(acc, in, nbytes);
		if ((rc = phase_up(&c, root, K_UP2, acc, 1, 0)) < 0)
			goto fail;
		ret = rc ? -EBADMSG : 0;
		if (!ret && c.me == root)
			memcpy(out, acc, nbytes);
	} else {
		/* round 2: the broadcast over the tree rooted at root */
		if (c.me == root) {
			c.dmsg[0] = HSET(c.hdr, PHASE, PN_COLL_PHASE_DOWN);
			memcpy(&c.dmsg[1], in, nbytes);
			c.dlen = HDR_BYTES + nbytes;
		}
		if ((rc = phase_down(&c, root, K_DOWN2)) < 0)
			goto fail;
		ret = c.dlen == HDR_BYTES + nbytes ? 0 : -EPROTO;
		if (!ret && c.me != root)
			memcpy(out, &c.dmsg[1], nbytes);
	}
	goto out;
fail:
	ret = rc;
	abort_all(&c, rc, root < c.n ? root : 0);
	p->coll_dirty = DRAIN_EPISODES;
out:
	for (unsigned i = 0; i <= FANOUT; i++)
		rdone(&c, &c.rreq[i]);
	rdone(&c, &c.abort_rq);
	for (unsigned i = 0; i < c.nsreq; i++)
		sdone(&c, &c.sreq[i]);
	return ret;
}

const char *pn_coll_path(const pn_port_t *p)
{
	if (!p)
		return "?";
	switch (p->coll_mode) {
	case PT_COLL_HW: return "unit";
	case PT_COLL_SW: return "sw";
	case PT_COLL_BROKEN: return "failed";
	default: return "undecided";
	}
}

int pn_allreduce(pn_port_t *p, const void *in, void *out, size_t nbytes, int dtype, int red)
{
	return coll_run(p, PN_COLL_OP_ALLREDUCE, 0, in, out, nbytes, dtype, red);
}

int pn_reduce(pn_port_t *p, unsigned root, const void *in, void *out, size_t nbytes, int dtype, int red)
{
	return coll_run(p, PN_COLL_OP_REDUCE, root, in, out, nbytes, dtype, red);
}

int pn_bcast(pn_port_t *p, unsigned root, void *buf, size_t nbytes)
{
	return coll_run(p, PN_COLL_OP_BCAST, root, buf, buf, nbytes, PN_COLL_T_I32, PN_COLL_RED_SUM);
}
