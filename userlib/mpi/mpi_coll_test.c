/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * mpi_coll_test: MPI_Allreduce and MPI_Bcast of small vectors, as an MPI program writes
 * them (tests/sim/test_mpi_sim.py runs it with libparanic-mpicoll.so preloaded).
 *
 * Inputs are a function of (rank, element); rank 0 prints each result as
 * "result NAME HEX" (the bytes, little-endian) and, after gathering every rank's result
 * bytes with MPI_Gather, "same NAME 1" when all ranks hold the same bits. For the float
 * sums, whose bits depend on the order of the reduction, it also prints every rank's
 * input as "input NAME RANK HEX", from which the test computes the expected bytes
 * (paranic.hls.reduce_ref). Exit status 0, or 1 with a message when an MPI call fails.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, size;

static void report(const char *name, const void *buf, int bytes)
{
	unsigned char *all = rank == 0 ? malloc((size_t)bytes * (size_t)size) : NULL;
	int same = 1;
	MPI_Gather(buf, bytes, MPI_BYTE, all, bytes, MPI_BYTE, 0, MPI_COMM_WORLD);
	if (rank)
		return;
	for (int r = 1; r < size; r++)
		same &= !memcmp(all, all + (size_t)r * (size_t)bytes, (size_t)bytes);
	printf("result %s ", name);
	for (int i = 0; i < bytes; i++)
		printf("%02x", ((const unsigned char *)buf)[i]);
	printf("\nsame %s %d\n", name, same);
	free(all);
}

/* Every rank's input bytes, printed by rank 0 as "input NAME RANK HEX". */
static void report_inputs(const char *name, const void *buf, int bytes)
{
	unsigned char *all = rank == 0 ? malloc((size_t)bytes * (size_t)size) : NULL;
	MPI_Gather(buf, bytes, MPI_BYTE, all, bytes, MPI_BYTE, 0, MPI_COMM_WORLD);
	if (rank)
		return;
	for (int r = 0; r < size; r++) {
		printf("input %s %d ", name, r);
		for (int i = 0; i < bytes; i++)
			printf("%02x", all[(size_t)r * (size_t)bytes + (size_t)i]);
		printf("\n");
	}
	free(all);
}

#define CHECK(call)                                                             \
	do {                                                                    \
		int rc_ = (call);                                               \
		if (rc_ != MPI_SUCCESS) {                                       \
			fprintf(stderr, "rank %d: %s failed: %d\n", rank, #call, rc_); \
			MPI_Abort(MPI_COMM_WORLD, 1);                           \
		}                                                               \
	} while (0)

int main(int argc, char **argv)
{
	double d1, d32[32], dbig[64], o1, o32[32], obig[64];
	int32_t i8[8], oi8[8], b16[16];
	int64_t l4[4], ol4[4];
	float f5[5], of5[5];
	unsigned char bytes64[64];

	/* One write per line, each as soon as it is complete: mpirun merges every rank's
	 * output, and a fully buffered stdout left at exit in 4 KiB pieces would let the
	 * other ranks' lines (their statistics on stderr at MPI_Finalize) split a long
	 * result line. */
	setvbuf(stdout, NULL, _IOLBF, 1 << 16);
	MPI_Init(&argc, &argv);
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);

	d1 = 0.1 * (rank + 1);
	CHECK(MPI_Allreduce(&d1, &o1, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
	report("sum_d1", &o1, sizeof(o1));
	report_inputs("sum_d1", &d1, sizeof(d1));

	for (int i = 0; i < 32; i++)
		d32[i] = (rank + 1) * 1.0e-3 + i / 7.0;
	CHECK(MPI_Allreduce(d32, o32, 32, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
	report("sum_d32", o32, sizeof(o32));
	report_inputs("sum_d32", d32, sizeof(d32));

	for (int i = 0; i < 8; i++)
		i8[i] = (rank * 37 + i * 11) % 23 - 11;
	CHECK(MPI_Allreduce(i8, oi8, 8, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
	report("max_i8", oi8, sizeof(oi8));

	for (int i = 0; i < 4; i++)
		l4[i] = (int64_t)1 << (rank * 4 + i);
	CHECK(MPI_Allreduce(l4, ol4, 4, MPI_INT64_T, MPI_BOR, MPI_COMM_WORLD));
	report("bor_l4", ol4, sizeof(ol4));

	for (int i = 0; i < 5; i++)
		of5[i] = f5[i] = (float)(rank - 1.5) * (float)(i + 1);
	CHECK(MPI_Allreduce(MPI_IN_PLACE, of5, 5, MPI_FLOAT, MPI_MIN, MPI_COMM_WORLD));
	report("min_f5", of5, sizeof(of5));

	for (int i = 0; i < 64; i++)   /* 512 bytes: more than the unit takes, MPI's own */
		dbig[i] = rank + i;
	CHECK(MPI_Allreduce(dbig, obig, 64, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
	report("sum_big", obig, sizeof(obig));

	for (int i = 0; i < 16; i++)
		b16[i] = rank == 1 ? 1000 + i : -1;
	CHECK(MPI_Bcast(b16, 16, MPI_INT, 1 % size, MPI_COMM_WORLD));
	report("bcast_i16", b16, sizeof(b16));

	for (int i = 0; i < 64; i++)
		bytes64[i] = rank == 0 ? (unsigned char)(3 * i + 1) : 0;
	CHECK(MPI_Bcast(bytes64, 64, MPI_BYTE, 0, MPI_COMM_WORLD));
	report("bcast_b64", bytes64, sizeof(bytes64));

	(void)f5;
	MPI_Finalize();
	return 0;
}
