/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * mpi_heat: heat diffusion on an n x n plate, ParaStation's Table 4 application
 * (Warschko, Blum, Tichy 1998): Jacobi iterations, rows block-distributed over the
 * ranks, a halo exchange with the neighbours above and below every step, a global
 * reduction of the residual every step, the result gathered on rank 0 every G steps.
 *
 *   mpi_heat [-n N] [-s STEPS] [-g GATHER_EVERY]      (defaults 64, 200, 20)
 *
 * The plate's edges are held at fixed temperatures (top 100, left 50, right and
 * bottom 0), the interior starts at 0. Each point's update is the same floating-point
 * expression whatever the decomposition, and the residual is a maximum (exact in any
 * order), so the result is bit for bit the same on any number of ranks: rank 0
 * prints a checksum over the gathered plate (FNV-1a of its doubles in row order) and
 * their sum in a fixed order, which must not depend on the rank count.
 *
 * Output of rank 0, one line:
 *   heat n=N steps=S ranks=P residual=R sum=X checksum=0x... ms_per_step=T
 * Exit status 0, or 1 (after "FAIL ...") on an error.
 */
#define _GNU_SOURCE
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TOP_T   100.0
#define LEFT_T   50.0

static void die(const char *msg)
{
	fprintf(stderr, "FAIL heat: %s\n", msg);
	MPI_Abort(MPI_COMM_WORLD, 1);
	exit(1);
}

static int arg_int(const char *s, int lo, int hi, const char *what)
{
	char *end;
	long v = strtol(s, &end, 10);
	if (*s == 0 || *end || v < lo || v > hi) {
		fprintf(stderr, "mpi_heat: %s must be an integer in %d..%d, not '%s'\n", what, lo, hi, s);
		MPI_Abort(MPI_COMM_WORLD, 2);
		exit(2);
	}
	return (int)v;
}

/* Rows [first, first + count) of the n interior rows (1-based in the plate) go to rank r. */
static void split(int n, int ranks, int r, int *first, int *count)
{
	int base = n / ranks, extra = n % ranks;
	*count = base + (r < extra);
	*first = 1 + r * base + (r < extra ? r : extra);
}

int main(int argc, char **argv)
{
	int n = 64, steps = 200, gather_every = 20, rank, ranks, opt;
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &ranks);
	while ((opt = getopt(argc, argv, "n:s:g:")) != -1) {
		switch (opt) {
		case 'n': n = arg_int(optarg, 2, 1 << 14, "-n (grid size)"); break;
		case 's': steps = arg_int(optarg, 1, 1 << 24, "-s (steps)"); break;
		case 'g': gather_every = arg_int(optarg, 0, 1 << 24, "-g (gather every G steps, 0: only at the end)"); break;
		default:
			if (rank == 0)
				fprintf(stderr, "usage: mpi_heat [-n N] [-s STEPS] [-g GATHER_EVERY]\n");
			MPI_Abort(MPI_COMM_WORLD, 2);
			return 2;
		}
	}
	if (n < ranks) {
		/* Rank 0 says why and ends the job; the others wait for it, so that no other
		 * rank's abort can end the job before the message is out. */
		if (rank == 0) {
			fprintf(stderr, "mpi_heat: the grid (-n %d) needs at least one row per rank (%d ranks)\n", n, ranks);
			fflush(stderr);
			MPI_Abort(MPI_COMM_WORLD, 2);
		}
		MPI_Barrier(MPI_COMM_WORLD);
		return 2;
	}

	const int w = n + 2;               /* a row, edges included */
	int first, rows;
	split(n, ranks, rank, &first, &rows);
	/* Local rows 1..rows are plate rows first..first+rows-1; 0 and rows+1 are halos. */
	double *u = calloc((size_t)(rows + 2) * w, sizeof(double));
	double *v = calloc((size_t)(rows + 2) * w, sizeof(double));
	if (!u || !v)
		die("out of memory");
	for (int i = 0; i < rows + 2; i++) {
		int g = first - 1 + i;         /* plate row */
		for (int j = 0; j < w; j++) {
			double t = 0.0;
			if (g == 0)
				t = TOP_T;
			else if (g == n + 1)
				t = 0.0;
			else if (j == 0)
				t = LEFT_T;
			u[i * w + j] = v[i * w + j] = t;
		}
	}
	const int up = rank > 0 ? rank - 1 : MPI_PROC_NULL;
	const int down = rank < ranks - 1 ? rank + 1 : MPI_PROC_NULL;

	/* Rank 0 gathers the plate's interior rows every gather_every steps (Table 4's
	 * pattern) and at the end. */
	int *counts = NULL, *displs = NULL;
	double *plate = NULL;
	if (rank == 0) {
		counts = malloc(sizeof(int) * ranks);
		displs = malloc(sizeof(int) * ranks);
		plate = malloc(sizeof(double) * (size_t)n * w);
		if (!counts || !displs || !plate)
			die("out of memory");
		for (int r = 0; r < ranks; r++) {
			int f, c;
			split(n, ranks, r, &f, &c);
			counts[r] = c * w;
			displs[r] = (f - 1) * w;
		}
	}

	double residual = 0.0;
	MPI_Barrier(MPI_COMM_WORLD);
	double t0 = MPI_Wtime();
	for (int s = 1; s <= steps; s++) {
		/* Halo exchange: my first row up / the row below me from down, and the reverse. */
		MPI_Sendrecv(&u[1 * w], w, MPI_DOUBLE, up, 1, &u[(rows + 1) * w], w, MPI_DOUBLE, down, 1,
			     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		MPI_Sendrecv(&u[rows * w], w, MPI_DOUBLE, down, 2, &u[0], w, MPI_DOUBLE, up, 2,
			     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		double local = 0.0;
		for (int i = 1; i <= rows; i++)
			for (int j = 1; j <= n; j++) {
				double x = 0.25 * (u[(i - 1) * w + j] + u[(i + 1) * w + j] + u[i * w + j - 1] + u[i * w + j + 1]);
				double d = x > u[i * w + j] ? x - u[i * w + j] : u[i * w + j] - x;
				if (d > local)
					local = d;
				v[i * w + j] = x;
			}
		double *t = u;
		u = v;
		v = t;
		MPI_Allreduce(&local, &residual, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
		if ((gather_every && s % gather_every == 0) || s == steps)
			MPI_Gatherv(&u[w], rows * w, MPI_DOUBLE, plate, counts, displs, MPI_DOUBLE, 0, MPI_COMM_WORLD);
	}
	double t1 = MPI_Wtime();

	if (rank == 0) {
		uint64_t h = 1469598103934665603ull;     /* FNV-1a 64 over the doubles' bytes, row order */
		const unsigned char *b = (const unsigned char *)plate;
		for (size_t k = 0; k < sizeof(double) * (size_t)n * w; k++) {
			h ^= b[k];
			h *= 1099511628211ull;
		}
		double sum = 0.0;
		for (size_t k = 0; k < (size_t)n * w; k++)
			sum += plate[k];
		printf("heat n=%d steps=%d ranks=%d residual=%.17g sum=%.17g checksum=0x%016llx ms_per_step=%.4f\n",
		       n, steps, ranks, residual, sum, (unsigned long long)h, (t1 - t0) * 1e3 / steps);
		fflush(stdout);
	}
	free(u);
	free(v);
	free(plate);
	free(counts);
	free(displs);
	MPI_Finalize();
	return 0;
}
