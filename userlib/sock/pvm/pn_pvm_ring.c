/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * pn_pvm_ring: a PVM master/worker program whose workers talk to each other over
 * PVM's direct task-to-task routes (PvmRouteDirect: a TCP connection between the two
 * tasks, not through the pvmds), for docs/pvm.md and tests/userlib/test_pvm.py.
 *
 *   pn_pvm_ring [WORKERS [INTS [PINGS]]]   (defaults: 2 per host of the virtual machine, 16384, 200)
 *
 * The master spawns WORKERS copies of itself (spread over the hosts by PVM), sends each
 * its index and everyone's task id. Worker i fills INTS ints with i * 1000003 + k, sends
 * them straight to worker i+1 (wrapping), checks what worker i-1 sent it element by
 * element, and reports (index, host name, the sum it received, errors, and the socket
 * library's count of cluster TCP connections to other nodes, pn_sock_stat("tcp_remote"),
 * -1 without libparanic_sock.so) to the master, which checks every sum against the
 * value it computes itself. Output of the master:
 *   "ping HOST rtt_us T n N"   before the ring: N round trips of one int between the
 *                              master and the first worker on another host (direct route)
 *   "worker I on HOST sum S ok tcp_remote R"   per worker
 *   "ring ms M"   from the first setup message to the last result
 *   "ok ring workers=N ints=K hosts=H"   or "FAIL ..." (exit 1)
 * Built against Debian's pvm-dev: gcc -o pn_pvm_ring pn_pvm_ring.c -lpvm3
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pvm3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAXW 64
#define TAG_SETUP 1
#define TAG_RING 2
#define TAG_RESULT 3
#define TAG_PING 4
#define PINGS 200   /* default */

static double now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int64_t expected_sum(int from, int ints)
{
	int64_t s = 0;
	for (int k = 0; k < ints; k++)
		s += (int64_t)from * 1000003 + k;
	return s;
}

/* The preloaded socket library's counter (docs/sockets.md), -1 without it. */
static int sock_stat(const char *name)
{
	long long (*f)(const char *);
	*(void **)&f = dlsym(RTLD_DEFAULT, "pn_sock_stat");
	return f ? (int)f(name) : -1;
}

static int worker(void)
{
	int idx, n, ints, tids[MAXW], errors = 0, from, remote;
	char host[256] = "?";
	int *out, *in;
	int64_t sum = 0;
	double dsum;

	pvm_setopt(PvmRoute, PvmRouteDirect);
	for (;;) {   /* the master's pings (echoed), then the setup */
		int bufid = pvm_recv(pvm_parent(), -1), len, tag, src, k;
		if (bufid < 0 || pvm_bufinfo(bufid, &len, &tag, &src) < 0)
			return 1;
		if (tag == TAG_SETUP)
			break;
		if (tag != TAG_PING)
			continue;
		pvm_upkint(&k, 1, 1);
		pvm_initsend(PvmDataDefault);
		pvm_pkint(&k, 1, 1);
		pvm_send(pvm_parent(), TAG_PING);
	}
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
	remote = sock_stat("tcp_remote");   /* both ring connections are up by now */
	pvm_initsend(PvmDataDefault);
	pvm_pkint(&idx, 1, 1);
	dsum = (double)sum;   /* exact below 2^53; XDR packs a long in 32 bits */
	pvm_pkdouble(&dsum, 1, 1);
	pvm_pkint(&errors, 1, 1);
	pvm_pkstr(host);
	pvm_pkint(&remote, 1, 1);
	pvm_send(pvm_parent(), TAG_RESULT);
	free(out);
	free(in);
	pvm_exit();
	return 0;
}

int main(int argc, char **argv)
{
	int nhost, narch, n, ints = argc > 2 ? atoi(argv[2]) : 16384, pings = argc > 3 ? atoi(argv[3]) : PINGS,
	    tids[MAXW], got, bad = 0;
	struct pvmhostinfo *hosts;
	char *self;
	double t_ring;

	if (pvm_mytid() < 0)
		return 1;
	if (pvm_parent() >= 0)
		return worker();
	pvm_setopt(PvmRoute, PvmRouteDirect);
	pvm_config(&nhost, &narch, &hosts);
	n = argc > 1 ? atoi(argv[1]) : 2 * nhost;
	if (n < 2 || n > MAXW || ints < 1 || pings < 1) {
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
	for (int i = 0; i < n; i++) {   /* round trips to the first worker on another host */
		double t0 = now_us();
		int k;
		if (pvm_tidtohost(tids[i]) == pvm_tidtohost(pvm_mytid()))
			continue;
		for (k = 0; k < pings + 10; k++) {   /* 10 to warm up (the direct route's connect) */
			int back = -1;
			if (k == 10)
				t0 = now_us();
			pvm_initsend(PvmDataDefault);
			pvm_pkint(&k, 1, 1);
			pvm_send(tids[i], TAG_PING);
			if (pvm_recv(tids[i], TAG_PING) < 0 || pvm_upkint(&back, 1, 1) < 0 || back != k)
				break;
		}
		for (int h = 0; h < nhost; h++)
			if (hosts[h].hi_tid == pvm_tidtohost(tids[i]))
				printf(k == pings + 10 ? "ping %s rtt_us %.1f n %d\n" : "FAIL ping %s\n", hosts[h].hi_name,
				       (now_us() - t0) / pings, pings);
		break;
	}
	t_ring = now_us();
	for (int i = 0; i < n; i++) {
		pvm_initsend(PvmDataDefault);
		pvm_pkint(&i, 1, 1);
		pvm_pkint(&n, 1, 1);
		pvm_pkint(&ints, 1, 1);
		pvm_pkint(tids, n, 1);
		pvm_send(tids[i], TAG_SETUP);
	}
	for (int r = 0; r < n; r++) {
		int idx, errors, remote;
		double dsum;
		int64_t sum;
		char host[256];
		pvm_recv(-1, TAG_RESULT);
		pvm_upkint(&idx, 1, 1);
		pvm_upkdouble(&dsum, 1, 1);
		sum = (int64_t)dsum;
		pvm_upkint(&errors, 1, 1);
		pvm_upkstr(host);
		pvm_upkint(&remote, 1, 1);
		if (idx < 0 || idx >= n || errors || sum != expected_sum((idx + n - 1) % n, ints)) {
			printf("FAIL worker %d on %s sum %lld errors %d\n", idx, host, (long long)sum, errors);
			bad++;
		} else {
			printf("worker %d on %s sum %lld ok tcp_remote %d\n", idx, host, (long long)sum, remote);
		}
	}
	printf("ring ms %.1f\n", (now_us() - t_ring) / 1e3);
	if (!bad)
		printf("ok ring workers=%d ints=%d hosts=%d\n", n, ints, nhost);
	fflush(stdout);
	pvm_exit();
	return bad ? 1 : 0;
}
