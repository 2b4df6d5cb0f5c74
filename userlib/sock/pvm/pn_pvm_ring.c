/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * pn_pvm_ring: a PVM master/worker program whose workers talk to each other over
 * PVM's direct task-to-task routes (PvmRouteDirect: a TCP connection between the two
 * tasks, not through the pvmds), for docs/pvm.md and tests/userlib/test_pvm.py.
 *
 *   pn_pvm_ring [WORKERS [INTS]]     (defaults: 2 per host of the virtual machine, 16384)
 *
 * The master spawns WORKERS copies of itself (spread over the hosts by PVM), sends each
 * its index and everyone's task id. Worker i fills INTS ints with i * 1000003 + k, sends
 * them straight to worker i+1 (wrapping), checks what worker i-1 sent it element by
 * element, and reports (index, host name, the sum it received, errors) to the master,
 * which checks every sum against the value it computes itself. Output of the master:
 *   "worker I on HOST sum S ok"   per worker
 *   "ok ring workers=N ints=K hosts=H"   or "FAIL ..." (exit 1)
 * Built against Debian's pvm-dev: gcc -o pn_pvm_ring pn_pvm_ring.c -lpvm3
 */
#define _DEFAULT_SOURCE
#include <pvm3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAXW 64
#define TAG_SETUP 1
#define TAG_RING 2
#define TAG_RESULT 3

static int64_t expected_sum(int from, int ints)
{
	int64_t s = 0;
	for (int k = 0; k < ints; k++)
		s += (int64_t)from * 1000003 + k;
	return s;
}

static int worker(void)
{
	int idx, n, ints, tids[MAXW], errors = 0, from;
	char host[256] = "?";
	int *out, *in;
	int64_t sum = 0;
	double dsum;

	pvm_setopt(PvmRoute, PvmRouteDirect);
	if (pvm_recv(pvm_parent(), TAG_SETUP) < 0)
		return 1;
	pvm_upkint(&idx, 1, 1);
	pvm_upkint(&n, 1, 1);
	pvm_upkint(&ints, 1, 1);
	if (n < 1 || n > MAXW || ints < 1)
		return 1;
	pvm_upkint(tids, n, 1);
	out = malloc(sizeof(int) * (size_t)ints);
	in = malloc(sizeof(int) * (size_t)ints);
	if (!out || !in)
		return 1;
	for (int k = 0; k < ints; k++)
		out[k] = idx * 1000003 + k;
	pvm_initsend(PvmDataRaw);
	pvm_pkint(out, ints, 1);
	pvm_send(tids[(idx + 1) % n], TAG_RING);
	from = (idx + n - 1) % n;
	pvm_recv(tids[from], TAG_RING);
	pvm_upkint(in, ints, 1);
	for (int k = 0; k < ints; k++) {
		if (in[k] != from * 1000003 + k)
			errors++;
		sum += in[k];
	}
	gethostname(host, sizeof(host) - 1);
	pvm_initsend(PvmDataDefault);
	pvm_pkint(&idx, 1, 1);
	dsum = (double)sum;   /* exact below 2^53; XDR packs a long in 32 bits */
	pvm_pkdouble(&dsum, 1, 1);
	pvm_pkint(&errors, 1, 1);
	pvm_pkstr(host);
	pvm_send(pvm_parent(), TAG_RESULT);
	free(out);
	free(in);
	pvm_exit();
	return 0;
}

int main(int argc, char **argv)
{
	int nhost, narch, n, ints = argc > 2 ? atoi(argv[2]) : 16384, tids[MAXW], got, bad = 0;
	struct pvmhostinfo *hosts;
	char *self;

	if (pvm_mytid() < 0)
		return 1;
	if (pvm_parent() >= 0)
		return worker();
	pvm_setopt(PvmRoute, PvmRouteDirect);
	pvm_config(&nhost, &narch, &hosts);
	n = argc > 1 ? atoi(argv[1]) : 2 * nhost;
	if (n < 2 || n > MAXW || ints < 1) {
		printf("FAIL bad arguments\n");
		pvm_exit();
		return 1;
	}
	self = strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0];   /* found on the hosts' ep= */
	got = pvm_spawn(self, NULL, PvmTaskDefault, "", n, tids);
	if (got != n) {
		printf("FAIL spawned %d of %d workers (first error %d)\n", got, n, got >= 0 && got < n ? tids[got] : got);
		for (int i = 0; i < got; i++)
			pvm_kill(tids[i]);
		pvm_exit();
		return 1;
	}
	for (int i = 0; i < n; i++) {
		pvm_initsend(PvmDataDefault);
		pvm_pkint(&i, 1, 1);
		pvm_pkint(&n, 1, 1);
		pvm_pkint(&ints, 1, 1);
		pvm_pkint(tids, n, 1);
		pvm_send(tids[i], TAG_SETUP);
	}
	for (int r = 0; r < n; r++) {
		int idx, errors;
		double dsum;
		int64_t sum;
		char host[256];
		pvm_recv(-1, TAG_RESULT);
		pvm_upkint(&idx, 1, 1);
		pvm_upkdouble(&dsum, 1, 1);
		sum = (int64_t)dsum;
		pvm_upkint(&errors, 1, 1);
		pvm_upkstr(host);
		if (idx < 0 || idx >= n || errors || sum != expected_sum((idx + n - 1) % n, ints)) {
			printf("FAIL worker %d on %s sum %lld errors %d\n", idx, host, (long long)sum, errors);
			bad++;
		} else {
			printf("worker %d on %s sum %lld ok\n", idx, host, (long long)sum);
		}
	}
	if (!bad)
		printf("ok ring workers=%d ints=%d hosts=%d\n", n, ints, nhost);
	fflush(stdout);
	pvm_exit();
	return bad ? 1 : 0;
}
