/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * mpi_bench: MPI point-to-point and collective timing in the OSU micro-benchmarks'
 * patterns (our own client: the OSU sources are not reachable from here).
 *
 *   mpi_bench TEST[,TEST...] [-b BYTES] [-B BW_BYTES] [-i ITERS] [-I BW_ITERS]
 *             [-C COLL_ITERS] [-w WARMUP] [-r SAMPLES] [-W WINDOW] [-c wall|paranic]
 *
 * The tests run one after the other in one job (one JSON line each):
 * latency    osu_latency: ranks 0 and 1 ping-pong BYTES (MPI_Send/MPI_Recv);
 *            one way = half the round trip.
 * bw         osu_bw: rank 0 posts WINDOW (default 64) MPI_Isend of BW_BYTES (default
 *            1 MiB; ITERS: BW_ITERS, default 10), rank 1
 *            WINDOW MPI_Irecv, both MPI_Waitall, then rank 1 answers 4 bytes;
 *            time per message = elapsed / (ITERS * WINDOW).
 * barrier    osu_barrier: MPI_Barrier back to back; time per call.
 * allreduce  osu_allreduce: MPI_Allreduce of BYTES/8 doubles (MPI_SUM); time per call.
 * Collectives: every rank times its loop; a sample is the largest of the ranks' times.
 *
 * BYTES defaults to 8, ITERS to 1000 (COLL_ITERS, for barrier and allreduce: ITERS). Each of SAMPLES (default 5) samples times ITERS
 * operations after WARMUP untimed ones (first sample only; default ITERS / 10 + 1).
 * The clock (-c): "wall" is MPI_Wtime; "paranic" is libparanic's pn_now_ns on a context of the rank's node (PARANIC_* from pn_mpi_exec): simulated
 * time on the sim backend, the wall clock on sw. Results are checked (the data that
 * arrived, the allreduce's sum); a wrong one is "FAIL ..." and exit status 1.
 *
 * Output of rank 0, one JSON line per test:
 *   {"bench": "mpi", "test": T, "bytes": B, "ranks": P, "iters": I, "window": W,
 *    "clock": C, "samples_ns": [ns per operation of each sample, ...]}
 * latency adds "fastest_ns": [each sample's fastest single round trip, halved]: on the
 * sim clock the hardware path, which is deterministic (simulated time keeps running while
 * a rank is descheduled, which only ever adds).
 */
#define _GNU_SOURCE
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "paranic/pn_hal.h"

static int rank, ranks;
static pn_hal_t *clk;                   /* -c paranic */

static void fail(const char *fmt, const char *what, long a, long b)
{
	fprintf(stderr, "FAIL mpi_bench: ");
	fprintf(stderr, fmt, what, a, b);
	fprintf(stderr, "\n");
	MPI_Abort(MPI_COMM_WORLD, 1);
	exit(1);
}

static double now_ns(void)
{
	return clk ? (double)pn_now_ns(clk) : MPI_Wtime() * 1e9;
}

static long arg_long(const char *s, long lo, long hi, const char *what)
{
	char *end;
	long v = strtol(s, &end, 10);
	if (*s == 0 || *end || v < lo || v > hi) {
		if (rank == 0)
			fprintf(stderr, "mpi_bench: %s must be an integer in %ld..%ld, not '%s'\n", what, lo, hi, s);
		MPI_Abort(MPI_COMM_WORLD, 2);
		exit(2);
	}
	return v;
}

static unsigned char pattern(size_t k, unsigned seed)
{
	return (unsigned char)(k * 131u + seed * 7u + 1u);
}

static void fill(unsigned char *b, size_t n, unsigned seed)
{
	for (size_t k = 0; k < n; k++)
		b[k] = pattern(k, seed);
}

static void check(const unsigned char *b, size_t n, unsigned seed, const char *what)
{
	for (size_t k = 0; k < n; k++)
		if (b[k] != pattern(k, seed))
			fail("%s: byte %ld of %ld is wrong", what, (long)k, (long)n);
}

/* The fastest single round trip of the last pingpong() sample, one way (rank 0). */
static double fastest_ns;

/* One sample of ITERS ping-pongs, ns per one-way message (the mean over the sample). */
static double pingpong(unsigned char *sb, unsigned char *rb, long bytes, long iters)
{
	double t0 = now_ns();
	fastest_ns = -1;
	for (long i = 0; i < iters; i++) {
		if (rank == 0) {
			double ti = now_ns();
			MPI_Send(sb, (int)bytes, MPI_BYTE, 1, 1, MPI_COMM_WORLD);
			MPI_Recv(rb, (int)bytes, MPI_BYTE, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			ti = (now_ns() - ti) / 2.0;
			if (fastest_ns < 0 || ti < fastest_ns)
				fastest_ns = ti;
		} else if (rank == 1) {
			MPI_Recv(rb, (int)bytes, MPI_BYTE, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			MPI_Send(sb, (int)bytes, MPI_BYTE, 0, 1, MPI_COMM_WORLD);
		}
	}
	return (now_ns() - t0) / (2.0 * iters);
}

static double bandwidth(unsigned char *sb, unsigned char *rb, long bytes, long iters, int window, MPI_Request *req)
{
	int ack = 0;
	double t0 = now_ns();
	for (long i = 0; i < iters; i++) {
		if (rank == 0) {
			for (int k = 0; k < window; k++)
				MPI_Isend(sb, (int)bytes, MPI_BYTE, 1, 100, MPI_COMM_WORLD, &req[k]);
			MPI_Waitall(window, req, MPI_STATUSES_IGNORE);
			MPI_Recv(&ack, 1, MPI_INT, 1, 101, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		} else if (rank == 1) {
			for (int k = 0; k < window; k++)
				MPI_Irecv(rb + (size_t)k * bytes, (int)bytes, MPI_BYTE, 0, 100, MPI_COMM_WORLD, &req[k]);
			MPI_Waitall(window, req, MPI_STATUSES_IGNORE);
			MPI_Send(&ack, 1, MPI_INT, 0, 101, MPI_COMM_WORLD);
		}
	}
	return (now_ns() - t0) / ((double)iters * window);
}

static double collective(int allreduce, double *in, double *out, int count, long iters)
{
	double t0 = now_ns();
	for (long i = 0; i < iters; i++) {
		if (allreduce)
			MPI_Allreduce(in, out, count, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
		else
			MPI_Barrier(MPI_COMM_WORLD);
	}
	double mine = (now_ns() - t0) / iters, worst = 0;
	MPI_Allreduce(&mine, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
	return worst;
}

static void usage(void)
{
	if (rank == 0)
		fprintf(stderr, "usage: mpi_bench TEST[,TEST...] [-b BYTES] [-B BW_BYTES] [-i ITERS] [-I BW_ITERS] "
				"[-C COLL_ITERS] [-w WARMUP] [-r SAMPLES] [-W WINDOW] [-c wall|paranic]\n"
				"  TEST: latency, bw, barrier, allreduce\n");
	MPI_Abort(MPI_COMM_WORLD, 2);
	exit(2);
}

enum test { T_LAT, T_BW, T_BAR, T_ALL };
static const char *const TEST_NAMES[] = { "latency", "bw", "barrier", "allreduce" };

/* Runs one test: SAMPLES samples (warm-up before the first), checks what arrived,
 * and rank 0 prints its JSON line. */
static void run_test(enum test t, long bytes, long iters, long warmup, long samples, long window,
		     const char *clock)
{
	if (t == T_ALL && bytes < 8)
		bytes = 8;
	size_t rbytes = (size_t)bytes * (t == T_BW ? (size_t)window : 1);
	unsigned char *sb = malloc(bytes ? (size_t)bytes : 1), *rb = malloc(rbytes ? rbytes : 1);
	MPI_Request *req = malloc(sizeof(MPI_Request) * (size_t)window);
	int count = (int)(bytes / 8);
	double *in = malloc(sizeof(double) * (size_t)(count ? count : 1));
	double *out = malloc(sizeof(double) * (size_t)(count ? count : 1));
	double *res = malloc(sizeof(double) * (size_t)samples);
	double *fast = malloc(sizeof(double) * (size_t)samples);
	if (!sb || !rb || !req || !in || !out || !res || !fast)
		fail("%s: out of memory (%ld, %ld)", TEST_NAMES[t], bytes, window);
	fill(sb, (size_t)bytes, (unsigned)rank);
	memset(rb, 0, rbytes);
	for (int k = 0; k < count; k++)
		in[k] = rank + 1 + k;

	for (long s = 0; s < samples; s++) {
		long n = s == 0 ? warmup : 0;
		MPI_Barrier(MPI_COMM_WORLD);
		switch (t) {
		case T_LAT:
			if (n)
				pingpong(sb, rb, bytes, n);
			res[s] = pingpong(sb, rb, bytes, iters);
			fast[s] = fastest_ns;
			break;
		case T_BW:
			if (n)
				bandwidth(sb, rb, bytes, n, (int)window, req);
			res[s] = bandwidth(sb, rb, bytes, iters, (int)window, req);
			break;
		default:
			if (n)
				collective(t == T_ALL, in, out, count, n);
			res[s] = collective(t == T_ALL, in, out, count, iters);
		}
	}
	/* What arrived is checked: the peer's pattern, the allreduce's sum. */
	if (t == T_LAT && rank < 2)
		check(rb, (size_t)bytes, (unsigned)(1 - rank), "latency: received data");
	if (t == T_BW && rank == 1)
		for (long k = 0; k < window; k++)
			check(rb + (size_t)k * bytes, (size_t)bytes, 0, "bw: received data");
	if (t == T_ALL)
		for (int k = 0; k < count; k++) {
			double want = (double)ranks * (ranks + 1) / 2 + (double)k * ranks;
			if (out[k] != want)
				fail("%s: element %ld is wrong (rank count %ld)", "allreduce", k, ranks);
		}
	if (rank == 0) {
		printf("{\"bench\": \"mpi\", \"test\": \"%s\", \"bytes\": %ld, \"ranks\": %d, \"iters\": %ld, "
		       "\"window\": %ld, \"clock\": \"%s\", \"samples_ns\": [", TEST_NAMES[t], t == T_BAR ? 0 : bytes,
		       ranks, iters, t == T_BW ? window : 1, clock);
		for (long s = 0; s < samples; s++)
			printf("%s%.1f", s ? ", " : "", res[s]);
		if (t == T_LAT) {
			printf("], \"fastest_ns\": [");
			for (long s = 0; s < samples; s++)
				printf("%s%.1f", s ? ", " : "", fast[s]);
		}
		printf("]}\n");
		fflush(stdout);
	}
	free(sb);
	free(rb);
	free(req);
	free(in);
	free(out);
	free(res);
	free(fast);
}

int main(int argc, char **argv)
{
	long bytes = 8, bw_bytes = 1L << 20, iters = 1000, bw_iters = 10, coll_iters = -1, warmup = -1, samples = 5,
	     window = 64;
	const char *clock = "wall";
	int opt, want[4] = { 0 }, order[4], ntests = 0;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &ranks);
	if (argc < 2 || argv[1][0] == '-')
		usage();
	for (char *list = strdup(argv[1]), *tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) {
		int k;
		for (k = 0; k < 4 && strcmp(tok, TEST_NAMES[k]); k++)
			;
		if (k == 4) {
			if (rank == 0)
				fprintf(stderr, "mpi_bench: unknown test '%s'\n", tok);
			usage();
		}
		if (!want[k])
			order[ntests++] = k;
		want[k] = 1;
	}
	optind = 2;
	while ((opt = getopt(argc, argv, "b:B:i:I:C:w:r:W:c:")) != -1) {
		switch (opt) {
		case 'b': bytes = arg_long(optarg, 0, 1L << 28, "-b (bytes)"); break;
		case 'B': bw_bytes = arg_long(optarg, 1, 1L << 28, "-B (bandwidth bytes)"); break;
		case 'i': iters = arg_long(optarg, 1, 1L << 30, "-i (iterations)"); break;
		case 'I': bw_iters = arg_long(optarg, 1, 1L << 30, "-I (bandwidth iterations)"); break;
		case 'C': coll_iters = arg_long(optarg, 1, 1L << 30, "-C (barrier/allreduce iterations)"); break;
		case 'w': warmup = arg_long(optarg, 0, 1L << 30, "-w (warm-up iterations)"); break;
		case 'r': samples = arg_long(optarg, 1, 10000, "-r (samples)"); break;
		case 'W': window = arg_long(optarg, 1, 1024, "-W (window)"); break;
		case 'c': clock = optarg; break;
		default: usage();
		}
	}
	if (optind < argc) {
		if (rank == 0)
			fprintf(stderr, "mpi_bench: unexpected argument '%s'\n", argv[optind]);
		usage();
	}
	if (strcmp(clock, "wall") && strcmp(clock, "paranic")) {
		if (rank == 0)
			fprintf(stderr, "mpi_bench: -c must be wall or paranic, not '%s'\n", clock);
		usage();
	}
	if ((want[T_LAT] || want[T_BW]) && ranks < 2) {
		if (rank == 0)
			fprintf(stderr, "mpi_bench: latency and bw need 2 ranks, not %d\n", ranks);
		MPI_Abort(MPI_COMM_WORLD, 2);
		return 2;
	}
	if (!strcmp(clock, "paranic")) {
		int r = pn_open(&clk, NULL);
		if (r < 0) {
			fprintf(stderr, "FAIL mpi_bench: -c paranic: pn_open: %s\n", pn_strerror(r));
			MPI_Abort(MPI_COMM_WORLD, 1);
			return 1;
		}
	}
	for (int k = 0; k < ntests; k++) {
		enum test t = (enum test)order[k];
		long it = t == T_BW ? bw_iters : (t == T_BAR || t == T_ALL) && coll_iters > 0 ? coll_iters : iters;
		long wu = warmup >= 0 ? warmup : it / 10 + 1;
		run_test(t, t == T_BW ? bw_bytes : bytes, it, wu, samples, window, clock);
	}
	if (clk)
		pn_close(clk);
	MPI_Finalize();
	return 0;
}
