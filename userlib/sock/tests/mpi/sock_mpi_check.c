/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * An Open MPI program for the socket emulation's test (tests/userlib/test_sock_mpi.py):
 * run with `--mca btl tcp,self --mca btl_tcp_if_include pn0` under
 * LD_PRELOAD=libparanic_sock.so, its traffic goes over ParaNIC. Every rank sends a ring
 * of messages (1 B .. 4 MiB, contents from sender, size and round, checked), exchanges
 * with every other rank (MPI_Sendrecv), then MPI_Allreduce and MPI_Barrier; rank 0
 * prints "ok ranks N bytes B" (B: the point-to-point payload of all ranks) or the first
 * mismatch. Exit status 0 only when every check held on every rank.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint8_t pat(int src, size_t n, int round, size_t i)
{
	return (uint8_t)(src * 131 + round * 17 + n * 7 + i * 13 + (i >> 8));
}

int main(int argc, char **argv)
{
	static const size_t sizes[] = {1, 8, 1000, 1024, 65536, 100003, 1u << 20, 4u << 20};
	int rank, n, bad = 0, allbad = 0;
	long long bytes = 0, allbytes = 0;
	uint8_t *sb, *rb;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &n);
	sb = malloc(4u << 20);
	rb = malloc(4u << 20);
	for (int round = 0; round < 2; round++)
		for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
			size_t len = sizes[k];
			int to = (rank + 1) % n, from = (rank + n - 1) % n;
			for (size_t i = 0; i < len; i++)
				sb[i] = pat(rank, len, round, i);
			memset(rb, 0, len);
			MPI_Sendrecv(sb, (int)len, MPI_BYTE, to, (int)k, rb, (int)len, MPI_BYTE, from, (int)k, MPI_COMM_WORLD,
				     MPI_STATUS_IGNORE);
			bytes += (long long)len;
			for (size_t i = 0; i < len && !bad; i++)
				if (rb[i] != pat(from, len, round, i)) {
					fprintf(stderr, "rank %d: ring round %d size %zu byte %zu wrong\n", rank, round, len, i);
					bad = 1;
				}
		}
	/* every pair, 100000 bytes each way */
	for (int peer = 0; peer < n; peer++) {
		size_t len = 100000;
		if (peer == rank)
			continue;
		for (size_t i = 0; i < len; i++)
			sb[i] = pat(rank, len, 9 + peer, i);
		MPI_Sendrecv(sb, (int)len, MPI_BYTE, peer, 99, rb, (int)len, MPI_BYTE, peer, 99, MPI_COMM_WORLD,
			     MPI_STATUS_IGNORE);
		bytes += (long long)len;
		for (size_t i = 0; i < len && !bad; i++)
			if (rb[i] != pat(peer, len, 9 + rank, i)) {
				fprintf(stderr, "rank %d: pair with %d byte %zu wrong\n", rank, peer, i);
				bad = 1;
			}
	}
	{
		long long v = rank + 1, sum = 0;
		MPI_Allreduce(&v, &sum, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
		if (sum != (long long)n * (n + 1) / 2) {
			fprintf(stderr, "rank %d: allreduce %lld\n", rank, sum);
			bad = 1;
		}
	}
	MPI_Barrier(MPI_COMM_WORLD);
	MPI_Reduce(&bad, &allbad, 1, MPI_INT, MPI_MAX, 0, MPI_COMM_WORLD);
	MPI_Reduce(&bytes, &allbytes, 1, MPI_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
	if (rank == 0)
		printf(allbad ? "FAILED ranks %d\n" : "ok ranks %d bytes %lld\n", n, allbytes);
	free(sb);
	free(rb);
	MPI_Finalize();
	return allbad ? 1 : 0;
}
