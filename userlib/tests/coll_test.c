/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * coll_test: the collectives (pn_coll.h) over any backend, one process per node.
 *
 *   pn_launch -n N -- coll_test CASE [BACKEND] [ARGS...]
 *
 * CASE:
 *   cases DIR   run the operations of DIR/cases.<node>.txt, one per line
 *               "op dtype red root nbytes flags" (numbers of pn_coll_spec.h; flags 1: in
 *               NULL, 2: out NULL), each node its own file (they differ to provoke
 *               mismatches), the inputs from DIR/in.<node>.bin (each operation's nbytes,
 *               back to back); writes DIR/out.<node>.bin (one PN_COLL_MAX_BYTES slot per
 *               operation, prefilled with 0xa5) and DIR/rc.<node>.txt (the return codes).
 *   tree N      print "tree N rel parent children..." for every relative id of N nodes
 *               (the generated PN_COLL_PARENT / PN_COLL_FIRST_CHILD), no port opened.
 *   kill        allreduce in a loop (at most 30 s); node 1 prints "phase-kill" as it
 *               starts (for `pn_launch -k 1:MS:phase-kill`: killed inside the loop); the
 *               others report the error they got and how long the failing call took:
 *               "ok kill rc=-E (text) after N operations, the last took MS ms".
 * Every port is on context PCTX of its node.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "paranic/pn_coll.h"
#include "tutil.h"

#define PCTX 1

static pn_port_t *port;
static unsigned me, N;

static int open_port(const char *backend)
{
	pn_port_opts_t po;
	int r;
	pn_port_opts_init(&po);
	po.hal.ctx = PCTX;
	po.hal.backend = backend;
	r = pn_port_open(&port, &po);
	CHECK(r == 0, "pn_port_open: %d (%s)", r, pn_strerror(r));
	me = (unsigned)pn_port_node(port);
	N = (unsigned)pn_num_nodes(pn_port_hal(port));
	EXPECT_RC(pn_port_barrier(port), 0);
	return 0;
}

static int case_tree(unsigned n)
{
	for (unsigned rel = 0; rel < n; rel++) {
		char line[256];
		int o = snprintf(line, sizeof(line), "tree %u %u %d", n, rel,
				 rel ? (int)PN_COLL_PARENT(rel, PN_COLL_DEFAULT_RADIX_LOG2) : -1);
		unsigned first = PN_COLL_FIRST_CHILD(rel, PN_COLL_DEFAULT_RADIX_LOG2);
		for (unsigned i = 0; i < (1u << PN_COLL_DEFAULT_RADIX_LOG2) && first + i < n; i++)
			o += snprintf(line + o, sizeof(line) - (size_t)o, " %u", first + i);
		say("%s", line);
	}
	return 0;
}

static int case_cases(const char *dir)
{
	char path[512];
	FILE *cf, *inf, *outf, *rcf;
	unsigned count = 0;
	int op, dtype, red, root, flags;
	long nbytes;
	snprintf(path, sizeof(path), "%s/cases.%u.txt", dir, me);
	cf = fopen(path, "r");
	CHECK(cf, "open %s", path);
	snprintf(path, sizeof(path), "%s/in.%u.bin", dir, me);
	inf = fopen(path, "rb");
	CHECK(inf, "open %s", path);
	snprintf(path, sizeof(path), "%s/out.%u.bin", dir, me);
	outf = fopen(path, "wb");
	CHECK(outf, "open %s", path);
	snprintf(path, sizeof(path), "%s/rc.%u.txt", dir, me);
	rcf = fopen(path, "w");
	CHECK(rcf, "open %s", path);
	while (fscanf(cf, "%d %d %d %d %ld %d", &op, &dtype, &red, &root, &nbytes, &flags) == 6) {
		uint8_t in[512], out[PN_COLL_MAX_BYTES];
		size_t take = nbytes > 0 && nbytes <= (long)sizeof(in) ? (size_t)nbytes : 0;
		int rc;
		CHECK(fread(in, 1, take, inf) == take, "short input at operation %u", count);
		memset(out, 0xa5, sizeof(out));
		const void *ip = flags & 1 ? NULL : in;
		void *opp = flags & 2 ? NULL : out;
		if (op == PN_COLL_OP_ALLREDUCE)
			rc = pn_allreduce(port, ip, opp, (size_t)nbytes, dtype, red);
		else if (op == PN_COLL_OP_REDUCE)
			rc = pn_reduce(port, (unsigned)root, ip, opp, (size_t)nbytes, dtype, red);
		else {
			if (!(flags & 1) && take <= sizeof(out))
				memcpy(out, in, take);
			rc = pn_bcast(port, (unsigned)root, flags & 1 ? NULL : out, (size_t)nbytes);
		}
		fprintf(rcf, "%d\n", rc);
		fwrite(out, 1, sizeof(out), outf);
		count++;
	}
	fclose(cf);
	fclose(inf);
	fclose(outf);
	fclose(rcf);
	say("ok cases %u operations", count);
	return 0;
}

static int case_kill(void)
{
	double in[4] = {1, 2, 3, (double)me}, out[4];
	int rc = 0;
	unsigned long ops = 0;
	uint64_t t0, last = 0;
	/* a few good rounds: every tree link connected */
	for (int i = 0; i < 3; i++)
		EXPECT_RC(pn_allreduce(port, in, out, sizeof(in), PN_COLL_T_F64, PN_COLL_RED_SUM), 0);
	if (me == 1)
		say("phase-kill");   /* pn_launch -k 1:MS:phase-kill: killed MS ms later, inside the loop */
	t0 = t_now_ns();
	while (t_now_ns() - t0 < 30000000000ull) {
		last = t_now_ns();
		rc = pn_allreduce(port, in, out, sizeof(in), PN_COLL_T_F64, PN_COLL_RED_SUM);
		if (rc != 0)
			break;
		ops++;
	}
	CHECK(rc != 0, "30 s of allreduces succeeded: node 1 was not killed");
	say("ok kill rc=%d (%s) after %lu operations, the last took %llu ms", rc, pn_strerror(rc), ops,
	    (unsigned long long)((t_now_ns() - last) / 1000000));
	return 0;
}

int main(int argc, char **argv)
{
	const char *name = argc > 1 ? argv[1] : "";
	const char *backend = argc > 2 && strcmp(argv[2], "-") ? argv[2] : NULL;
	int r = -1;
	t_case = name;
	if (!strcmp(name, "tree"))
		return case_tree(argc > 2 ? (unsigned)atoi(argv[2]) : 1);
	if (open_port(backend) < 0)
		return 1;
	if (!strcmp(name, "cases") && argc > 3)
		r = case_cases(argv[3]);
	else if (!strcmp(name, "kill"))
		r = case_kill();
	else {
		say("FAIL unknown case %s", name);
		return 2;
	}
	if (r == 0 && strcmp(name, "kill"))
		pn_port_barrier(port);   /* nobody closes while others still need it */
	pn_port_close(port);
	return r == 0 && !t_failures ? 0 : 1;
}
