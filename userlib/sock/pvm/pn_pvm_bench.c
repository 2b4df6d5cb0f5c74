/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * pn_pvm_bench: the `pvm` row of `paranic bench layers` (docs/benchmarks.md, docs/pvm.md).
 * A PVM master (this program, started on node 0 by pvm_job.sh) spawns one copy of itself
 * on another host of the virtual machine and measures, over PVM's direct task-to-task
 * route (PvmRouteDirect: one TCP connection between the two tasks, under the preload
 * library a ParaNIC connection):
 *
 *   pingpong  an 8-byte message (pvm_initsend(PvmDataRaw), pvm_pkbyte, pvm_send) that the
 *             worker returns the same way (pvm_recv, pvm_upkbyte); latency_ns = half the
 *             round trip (mean over the iterations)
 *   stream    iters messages of BW bytes packed with pvm_initsend(PvmDataInPlace) (the
 *             data is not copied into a PVM buffer: pvm_send reads it from user memory),
 *             back to back; the worker unpacks each into its own buffer and answers one
 *             short message after the last; latency_ns = time / iters; MBps = bytes / that
 *
 *   pn_pvm_bench [--bench pingpong,stream|all] [--min BYTES] [--bw BYTES] [--scale F]
 *                [--host NAME] [--encoding inplace|raw]
 *
 * Defaults: all, 8, 1 MiB, 1.0, the first host other than the master's, inplace.
 * Iterations as pn_bench: scale * clamp(64 MiB / (bytes + 64), 8, 20000), at least 2, a
 * tenth more (plus one) before them to warm up (the direct route's connect).
 * Every message is checked (length, and a byte pattern of its sequence number at both
 * ends); a mismatch is "FAIL ..." and exit 1.
 *
 * Time: under the preload library (paranic-rsh preloads it) pn_sock_now_ns (dlsym), the
 * socket port's backend time (read from the first timed iteration on, once the direct
 * route has opened the port): simulated time on the sim backend ("clock": "backend");
 * elsewhere the monotonic clock ("clock": "monotonic"). wall_ns is the wall time of the
 * same iterations. tcp_remote: the library's count of cluster TCP connections to other
 * nodes (pn_sock_stat), -1 without it: the row is a ParaNIC one only if it is >= 1.
 * Output (the master), one JSON line per benchmark, as pn_bench prints them:
 *   {"bench": "pingpong", "layer": "pvm", "bytes": 8, "iters": N, "latency_ns": T,
 *    "MBps": M, "wall_ns": W, "clock": "backend", "tcp_remote": 1, "encoding": "raw",
 *    "peer": "pn-node1"}
 * Build (Debian's pvm-dev): gcc -std=c11 -O2 -o pn_pvm_bench pn_pvm_bench.c -lpvm3
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pvm3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define TAG_CONF 11   /* master -> worker: lat bytes, bw bytes, encoding */
#define TAG_PING 12
#define TAG_DATA 13
#define TAG_END 14    /* master -> worker: answer the stream (int: messages expected) */
#define TAG_ACK 15    /* worker -> master: int messages received, int errors */
#define TAG_QUIT 16

static uint64_t (*sock_now)(void);   /* pn_sock_now_ns of the preloaded library */
static int backend_clock;

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t now_ns(void)
{
	return backend_clock ? sock_now() : mono_ns();
}

/* The start of a timed run: the backend's clock if the library has one by now (its
 * port opens with the first cluster connection, the direct route of the warm-up). */
static uint64_t start_ns(void)
{
	backend_clock = sock_now && sock_now() != 0;
	return now_ns();
}

static int sock_stat(const char *name)
{
	long long (*f)(const char *);
	*(void **)&f = dlsym(RTLD_DEFAULT, "pn_sock_stat");
	return f ? (int)f(name) : -1;
}

/* The message of sequence number k: its first and last byte carry k. */
static void mark(unsigned char *b, size_t n, unsigned k)
{
	b[0] = (unsigned char)k;
	b[n - 1] = (unsigned char)(k * 7 + 1);
}

static int marked(const unsigned char *b, size_t n, unsigned k)
{
	return b[0] == (unsigned char)k && b[n - 1] == (unsigned char)(k * 7 + 1);
}

static int pack_send(int tid, int tag, int enc, unsigned char *b, size_t n)
{
	if (pvm_initsend(enc) < 0 || pvm_pkbyte((char *)b, (int)n, 1) < 0)
		return -1;
	return pvm_send(tid, tag) < 0 ? -1 : 0;
}

/* Receive a message of exactly n bytes from tid with tag into b; 0 or -1. */
static int recv_bytes(int tid, int tag, unsigned char *b, size_t n)
{
	int bufid = pvm_recv(tid, tag), len, t, src;
	if (bufid < 0 || pvm_bufinfo(bufid, &len, &t, &src) < 0 || (size_t)len != n)
		return -1;
	return pvm_upkbyte((char *)b, (int)n, 1) < 0 ? -1 : 0;
}

static int worker(void)
{
	int conf[3], parent = pvm_parent(), count = 0, errors = 0;
	unsigned char *small, *big;

	pvm_setopt(PvmRoute, PvmRouteDirect);
	if (pvm_recv(parent, TAG_CONF) < 0 || pvm_upkint(conf, 3, 1) < 0 || conf[0] < 1 || conf[1] < 1)
		return 1;
	small = malloc((size_t)conf[0]);
	big = malloc((size_t)conf[1]);
	if (!small || !big)
		return 1;
	for (;;) {
		int bufid = pvm_recv(parent, -1), len, tag, src, want;
		if (bufid < 0 || pvm_bufinfo(bufid, &len, &tag, &src) < 0)
			return 1;
		if (tag == TAG_QUIT)
			break;
		if (tag == TAG_PING) {   /* echo it the way it came */
			if ((size_t)len != (size_t)conf[0] || pvm_upkbyte((char *)small, len, 1) < 0 ||
			    pack_send(parent, TAG_PING, PvmDataRaw, small, (size_t)conf[0]) < 0)
				return 1;
		} else if (tag == TAG_DATA) {
			if (len != conf[1] || pvm_upkbyte((char *)big, len, 1) < 0 || !marked(big, (size_t)len, (unsigned)count))
				errors++;
			count++;
		} else if (tag == TAG_END) {
			pvm_upkint(&want, 1, 1);
			if (want != count)
				errors++;
			pvm_initsend(PvmDataDefault);
			pvm_pkint(&count, 1, 1);
			pvm_pkint(&errors, 1, 1);
			pvm_send(parent, TAG_ACK);
			count = 0;
		}
	}
	free(small);
	free(big);
	pvm_exit();
	return 0;
}

static unsigned iters_for(size_t n, double scale)
{
	double it = (double)(64u << 20) / (double)(n + 64);
	it = it < 8 ? 8 : it > 20000 ? 20000 : it;
	it *= scale;
	return it < 2 ? 2 : (unsigned)it;
}

static void row(const char *bench, size_t n, unsigned it, uint64_t ns, uint64_t wall, const char *enc,
		const char *peer)
{
	double lat = (double)ns / it / (strcmp(bench, "pingpong") ? 1 : 2);
	printf("{\"bench\": \"%s\", \"layer\": \"pvm\", \"bytes\": %zu, \"iters\": %u, \"latency_ns\": %.1f, "
	       "\"MBps\": %.2f, \"wall_ns\": %.1f, \"clock\": \"%s\", \"tcp_remote\": %d, \"encoding\": \"%s\", "
	       "\"peer\": \"%s\"}\n",
	       bench, n, it, lat, lat > 0 ? (double)n * 1e3 / lat : 0.0,
	       (double)wall / it / (strcmp(bench, "pingpong") ? 1 : 2), backend_clock ? "backend" : "monotonic",
	       sock_stat("tcp_remote"), enc, peer);
	fflush(stdout);
}

static int pingpong(int tid, size_t n, double scale, const char *peer)
{
	unsigned it = iters_for(n, scale), warm = it / 10 + 1;
	unsigned char *b = calloc(1, n), *back = calloc(1, n);
	uint64_t t0 = 0, w0 = 0;
	int rc = 0;

	if (!b || !back)
		return -1;
	for (unsigned k = 0; k < warm + it && !rc; k++) {
		if (k == warm) {
			t0 = start_ns();
			w0 = mono_ns();
		}
		mark(b, n, k);
		if (pack_send(tid, TAG_PING, PvmDataRaw, b, n) < 0 || recv_bytes(tid, TAG_PING, back, n) < 0 ||
		    !marked(back, n, k)) {
			printf("FAIL pingpong %zu B: iteration %u\n", n, k);
			rc = -1;
		}
	}
	if (!rc)
		row("pingpong", n, it, now_ns() - t0, mono_ns() - w0, "raw", peer);
	free(b);
	free(back);
	return rc;
}

/* count messages of n bytes, then the worker's answer; 0 or -1. */
static int stream_run(int tid, size_t n, int enc, unsigned char *b, unsigned count, unsigned first)
{
	int got = -1, errors = -1, want = (int)count;
	for (unsigned k = 0; k < count; k++) {
		mark(b, n, first + k);
		if (pack_send(tid, TAG_DATA, enc, b, n) < 0)
			return -1;
	}
	pvm_initsend(PvmDataDefault);
	pvm_pkint(&want, 1, 1);
	if (pvm_send(tid, TAG_END) < 0 || pvm_recv(tid, TAG_ACK) < 0 || pvm_upkint(&got, 1, 1) < 0 ||
	    pvm_upkint(&errors, 1, 1) < 0 || got != want || errors != 0) {
		printf("FAIL stream %zu B: the worker got %d of %d messages, %d errors\n", n, got, want, errors);
		return -1;
	}
	return 0;
}

static int stream(int tid, size_t n, double scale, int enc, const char *encname, const char *peer)
{
	unsigned it = iters_for(n, scale), warm = it / 10 + 1;
	unsigned char *b = calloc(1, n);
	uint64_t t0, w0;
	int rc;

	if (!b)
		return -1;
	rc = stream_run(tid, n, enc, b, warm, 0);   /* the worker counts from 0 after each answer */
	t0 = start_ns();
	w0 = mono_ns();
	if (!rc)
		rc = stream_run(tid, n, enc, b, it, 0);
	if (!rc)
		row("stream", n, it, now_ns() - t0, mono_ns() - w0, encname, peer);
	free(b);
	return rc;
}

int main(int argc, char **argv)
{
	const char *benches = "all", *host = NULL, *encname = "inplace";
	double scale = 1.0;
	long lat = 8, bw = 1 << 20;
	int nhost, narch, tid, enc, rc = 0, conf[3];
	struct pvmhostinfo *hosts;
	char *self;

	if (pvm_mytid() < 0)
		return 1;
	if (pvm_parent() >= 0)
		return worker();
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--bench") && i + 1 < argc)
			benches = argv[++i];
		else if (!strcmp(argv[i], "--min") && i + 1 < argc)
			lat = atol(argv[++i]);
		else if (!strcmp(argv[i], "--bw") && i + 1 < argc)
			bw = atol(argv[++i]);
		else if (!strcmp(argv[i], "--scale") && i + 1 < argc)
			scale = atof(argv[++i]);
		else if (!strcmp(argv[i], "--host") && i + 1 < argc)
			host = argv[++i];
		else if (!strcmp(argv[i], "--encoding") && i + 1 < argc)
			encname = argv[++i];
		else
			lat = -1;
	}
	enc = !strcmp(encname, "inplace") ? PvmDataInPlace : !strcmp(encname, "raw") ? PvmDataRaw : -1;
	if (lat < 1 || bw < 2 || lat > (1 << 30) || bw > (1 << 30) || !(scale > 0) || enc < 0) {
		printf("FAIL bad arguments (usage: %s [--bench pingpong,stream|all] [--min BYTES] [--bw BYTES] "
		       "[--scale F] [--host NAME] [--encoding inplace|raw])\n", argv[0]);
		pvm_exit();
		return 1;
	}
	*(void **)&sock_now = dlsym(RTLD_DEFAULT, "pn_sock_now_ns");
	pvm_setopt(PvmRoute, PvmRouteDirect);
	pvm_config(&nhost, &narch, &hosts);
	for (int h = 0; h < nhost && !host; h++)   /* the first host that is not the master's */
		if (hosts[h].hi_tid != pvm_tidtohost(pvm_mytid()))
			host = hosts[h].hi_name;
	if (!host) {
		printf("FAIL no other host in the virtual machine (%d hosts)\n", nhost);
		pvm_exit();
		return 1;
	}
	self = strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0];   /* found on the hosts' ep= */
	if (pvm_spawn(self, NULL, PvmTaskHost, (char *)host, 1, &tid) != 1) {
		printf("FAIL could not spawn the worker on %s (%d)\n", host, tid);
		pvm_exit();
		return 1;
	}
	conf[0] = (int)lat;
	conf[1] = (int)bw;
	conf[2] = enc;
	pvm_initsend(PvmDataDefault);
	pvm_pkint(conf, 3, 1);
	pvm_send(tid, TAG_CONF);
	if (!strcmp(benches, "all") || strstr(benches, "pingpong"))
		rc = pingpong(tid, (size_t)lat, scale, host);
	if (!rc && (!strcmp(benches, "all") || strstr(benches, "stream")))
		rc = stream(tid, (size_t)bw, scale, enc, encname, host);
	pvm_initsend(PvmDataDefault);
	pvm_send(tid, TAG_QUIT);
	if (!rc)
		printf("ok pvm bench\n");
	fflush(stdout);
	pvm_exit();
	return rc ? 1 : 0;
}
