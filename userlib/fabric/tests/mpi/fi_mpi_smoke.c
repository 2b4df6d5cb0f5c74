/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * A small MPI program for the provider's Open MPI smoke test (tests/userlib/test_fabric.py):
 * run with 2 ranks over `--mca pml cm --mca mtl ofi --mca mtl_ofi_provider_include paranic`.
 * Point to point (0 B .. 4 MiB, content checked, both ways), MPI_Ssend, MPI_Probe +
 * MPI_Recv, MPI_Mprobe + MPI_Mrecv (FI_PEEK / FI_CLAIM underneath), MPI_Iprobe of nothing,
 * a cancelled MPI_Irecv, MPI_Barrier and MPI_Allreduce. Prints "ok mpi rank R" on success.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fails;
#define CHECK(c, ...)                                   \
	do {                                            \
		if (!(c)) {                             \
			printf("FAIL line %d: ", __LINE__); \
			printf(__VA_ARGS__);            \
			printf("\n");                   \
			fails++;                        \
		}                                       \
	} while (0)

static void fill(unsigned char *b, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		b[i] = (unsigned char)(seed * 31 + i * 7 + (i >> 8));
}

int main(int argc, char **argv)
{
	int rank, size;
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (size != 2) {
		if (!rank)
			printf("FAIL needs 2 ranks\n");
		MPI_Finalize();
		return 1;
	}
	int peer = 1 - rank;
	size_t max = 4u << 20;
	unsigned char *sb = malloc(max), *rb = malloc(max), *want = malloc(max);
	size_t sizes[] = {0, 1, 8, 100, 4096, 16384, 16385, 65536, 1000003, 4u << 20};
	for (unsigned i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		size_t n = sizes[i];
		MPI_Status st;
		fill(sb, n, 10 * i + rank);
		fill(want, n, 10 * i + peer);
		if (rank == 0) {
			MPI_Send(sb, (int)n, MPI_BYTE, peer, (int)i, MPI_COMM_WORLD);
			MPI_Recv(rb, (int)n, MPI_BYTE, peer, (int)i, MPI_COMM_WORLD, &st);
		} else {
			MPI_Recv(rb, (int)n, MPI_BYTE, peer, (int)i, MPI_COMM_WORLD, &st);
			MPI_Send(sb, (int)n, MPI_BYTE, peer, (int)i, MPI_COMM_WORLD);
		}
		int cnt;
		MPI_Get_count(&st, MPI_BYTE, &cnt);
		CHECK(cnt == (int)n && st.MPI_SOURCE == peer && st.MPI_TAG == (int)i && !memcmp(rb, want, n),
		      "ping-pong %zu bytes: count %d source %d", n, cnt, st.MPI_SOURCE);
	}
	/* Ssend, Probe, Mprobe, Iprobe of nothing, cancel */
	int v = 1000 + rank, got = 0, flag = 1;
	MPI_Status st;
	if (rank == 0) {
		MPI_Ssend(&v, 1, MPI_INT, peer, 77, MPI_COMM_WORLD);
		MPI_Send(sb, 5000, MPI_BYTE, peer, 78, MPI_COMM_WORLD);
		MPI_Send(sb, 300000, MPI_BYTE, peer, 79, MPI_COMM_WORLD);
	} else {
		MPI_Recv(&got, 1, MPI_INT, peer, 77, MPI_COMM_WORLD, &st);
		CHECK(got == 1000, "Ssend: got %d", got);
		MPI_Probe(MPI_ANY_SOURCE, 78, MPI_COMM_WORLD, &st);
		int cnt;
		MPI_Get_count(&st, MPI_BYTE, &cnt);
		CHECK(cnt == 5000 && st.MPI_SOURCE == 0, "Probe: count %d", cnt);
		MPI_Recv(rb, 5000, MPI_BYTE, 0, 78, MPI_COMM_WORLD, &st);
		MPI_Message msg;
		MPI_Mprobe(0, 79, MPI_COMM_WORLD, &msg, &st);
		MPI_Get_count(&st, MPI_BYTE, &cnt);
		CHECK(cnt == 300000, "Mprobe: count %d", cnt);
		MPI_Mrecv(rb, cnt, MPI_BYTE, &msg, &st);
		fill(want, 300000, 10 * 9 + 0);   /* sb of rank 0 still holds the last size's pattern */
		CHECK(!memcmp(rb, want, 300000), "Mrecv content");
	}
	MPI_Iprobe(peer, 4242, MPI_COMM_WORLD, &flag, &st);
	CHECK(!flag, "Iprobe found a message nobody sent");
	MPI_Request rq;
	MPI_Irecv(&got, 1, MPI_INT, peer, 4343, MPI_COMM_WORLD, &rq);
	MPI_Cancel(&rq);
	MPI_Wait(&rq, &st);
	int cancelled = 0;
	MPI_Test_cancelled(&st, &cancelled);
	CHECK(cancelled, "Irecv not cancelled");
	MPI_Barrier(MPI_COMM_WORLD);
	long sum = 0, mine = rank + 1;
	MPI_Allreduce(&mine, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
	CHECK(sum == 3, "Allreduce: %ld", sum);
	if (!fails)
		printf("ok mpi rank %d\n", rank);
	fflush(stdout);
	free(sb), free(rb), free(want);
	MPI_Finalize();
	return fails ? 1 : 0;
}
