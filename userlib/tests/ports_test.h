/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * What the ports test programs share (ports_test.c, ports_fault_test.c): one port per
 * process on context PCTX of its node, messages whose bytes are a function of (source,
 * destination, sequence number) so a receiver checks every byte, and the driver of a
 * program's case table (pt_main). Each program is one translation unit (tutil.h).
 */
#ifndef PORTS_TEST_H
#define PORTS_TEST_H

#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "paranic/pn_ports.h"
#include "tutil.h"

#define PCTX 1
#define ALL (~0ull)

static pn_port_t *port;
static unsigned me, myctx, N, mtu;
static size_t E;   /* the eager limit */

static inline uint32_t seed_of(unsigned src, unsigned sctx, unsigned dst, unsigned seq)
{
	return src * 7919u + sctx * 613u + dst * 104729u + seq * 31u + 1;
}

static inline int open_port(unsigned ctx, const char *backend)
{
	pn_port_opts_t o;
	int r;
	pn_port_opts_init(&o);
	o.hal.ctx = (int)ctx;
	o.hal.backend = backend;
	r = pn_port_open(&port, &o);
	CHECK(r == 0, "pn_port_open(ctx %u) returned %d (%s)", ctx, r, pn_strerror(r));
	me = (unsigned)pn_port_node(port);
	myctx = (unsigned)pn_port_ctx(port);
	N = (unsigned)pn_num_nodes(pn_port_hal(port));
	mtu = (unsigned)pn_mtu(pn_port_hal(port));
	E = (size_t)pn_port_eager_max(port);
	return 0;
}

/* Send message `seq` (pattern of me -> dst) of len bytes from buf. */
static inline int psend(unsigned dst, unsigned dctx, int chan, uint64_t tag, unsigned seq, size_t len, uint8_t *buf)
{
	int r;
	pat_fill(buf, len, seed_of(me, myctx, dst, seq), 0);
	r = pn_port_send(port, dst, dctx, chan, tag, buf, len);
	CHECK(r == 0, "pn_port_send(%u:%u ch %d, %zu bytes) returned %d (%s)", dst, dctx, chan, len, r,
	      pn_strerror(r));
	return 0;
}

static inline int pisend(unsigned dst, unsigned dctx, int chan, uint64_t tag, unsigned seq, size_t len, uint8_t *buf,
		  pn_port_req_t **req)
{
	int r;
	pat_fill(buf, len, seed_of(me, myctx, dst, seq), 0);
	r = pn_port_isend(port, dst, dctx, chan, tag, buf, len, req);
	CHECK(r == 0 && *req, "pn_port_isend(%u:%u, %zu bytes) returned %d (%s)", dst, dctx, len, r, pn_strerror(r));
	return 0;
}

/* Check a received message against what src sent as message seq. */
static inline int check_msg(const pn_port_status_t *st, unsigned src, unsigned sctx, int chan, uint64_t tag,
		     unsigned seq, size_t len, const uint8_t *buf)
{
	size_t bad;
	CHECK(st->error == 0, "status error %d", st->error);
	CHECK(st->src_node == (int)src && st->src_ctx == (int)sctx, "from %d:%d, expected %u:%u (tag %#llx)",
	      st->src_node, st->src_ctx, src, sctx, (unsigned long long)st->tag);
	CHECK(st->channel == chan && st->tag == tag, "channel %d tag %#llx, expected %d %#llx", st->channel,
	      (unsigned long long)st->tag, chan, (unsigned long long)tag);
	CHECK(st->len == len, "length %zu, expected %zu (tag %#llx)", st->len, len, (unsigned long long)tag);
	bad = pat_check(buf, len, seed_of(src, sctx, me, seq), 0);
	CHECK(bad == (size_t)-1, "message %u from %u:%u (%zu bytes) differs at byte %zu", seq, src, sctx, len, bad);
	return 0;
}

static inline int precv(int src, int sctx, int chan, uint64_t tag, uint64_t mask, uint8_t *buf, size_t cap,
		 pn_port_status_t *st)
{
	int r = pn_port_recv(port, src, sctx, chan, tag, mask, buf, cap, st, -1);
	CHECK(r >= 0 && (size_t)r == st->len, "pn_port_recv(%d:%d ch %d tag %#llx/%#llx) returned %d (%s)", src,
	      sctx, chan, (unsigned long long)tag, (unsigned long long)mask, r, pn_strerror(r));
	return 0;
}

static inline int wait_ok(pn_port_req_t **req, const char *what)
{
	pn_port_status_t st;
	int r = pn_port_wait(port, req, &st, -1);
	CHECK(r == 1 && !*req, "%s: pn_port_wait returned %d (%s)", what, r, pn_strerror(r));
	return 0;
}


/* A case of a test program: it runs on every node once all ports are open. */
struct pt_case {
	const char *name;
	unsigned min_nodes;           /* fewer nodes: the case is skipped */
	int (*fn)(void);
	int (*fn_backend)(const char *backend);   /* instead of fn: the case opens more ports */
	int alone;                    /* the case closes its own port; no final barrier */
	int no_barrier;               /* no final barrier (a case that kills processes) */
};

/* `PROGRAM CASE [BACKEND]`: open the port, wait for all, run the case, wait for all
 * again, close. Exit 0 only on success, 2 for an unknown case. */
static inline int pt_main(int argc, char **argv, const struct pt_case *cases, size_t n)
{
	const char *name = argc > 1 ? argv[1] : "";
	const char *backend = argc > 2 ? argv[2] : NULL;
	const struct pt_case *c = NULL;
	int r;

	for (size_t i = 0; i < n && !c; i++)
		if (!strcmp(name, cases[i].name))
			c = &cases[i];
	if (open_port(PCTX, backend) < 0)
		return 1;
	if (!getenv("PARANIC_RESPAWN"))
		pn_port_barrier(port);   /* all open before anyone sends */
	t_case = name;
	if (!c) {
		say("FAIL unknown case %s", name);
		return 2;
	}
	if (c->alone) {
		r = c->fn_backend ? c->fn_backend(backend) : c->fn();
		return r == 0 && !t_failures ? 0 : 1;
	}
	if (N < c->min_nodes) {
		say("skip %s (needs %u nodes)", t_case, c->min_nodes);
		pn_port_close(port);
		return 0;
	}
	r = c->fn_backend ? c->fn_backend(backend) : c->fn();
	if (r == 0 && !c->no_barrier)
		pn_port_barrier(port);   /* nobody closes while others still need it */
	pn_port_close(port);
	return r == 0 && !t_failures ? 0 : 1;
}

#endif /* PORTS_TEST_H */
