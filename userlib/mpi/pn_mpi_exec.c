/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * pn_mpi_exec: put an MPI rank on its ParaNIC node, then exec the program.
 *
 *   mpirun ... pn_mpi_exec PROGRAM ARGS...
 *
 * mpirun starts every rank on this one machine; each rank's node is
 * rank / PARANIC_PPN (default 1), where rank is OMPI_COMM_WORLD_RANK (Open MPI) or
 * PMI_RANK (MPICH's hydra). It sets PARANIC_NODE, PARANIC_RANK and
 * PARANIC_LOCAL_RANK (what pn_launch sets), checks the node against PARANIC_NODES,
 * and execs PROGRAM, so that the libfabric provider's pn_port_open(NULL) (or any
 * pn_open(NULL)) in the rank attaches to its own node (docs/mpi.md). When
 * PARANIC_MPICOLL names libparanic-mpicoll.so and the job has one rank per node, it
 * goes first in LD_PRELOAD: MPI_Allreduce/MPI_Bcast of small vectors on ParaNIC's
 * collectives (userlib/mpi/pn_mpicoll.c).
 * Exit status: PROGRAM's; 127 when it cannot be run; 2 on bad environment.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static long env_long(const char *name, long dflt, long lo, long hi)
{
	const char *s = getenv(name);
	char *end;
	long v;

	if (!s || !*s)
		return dflt;
	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || *end || v < lo || v > hi) {
		fprintf(stderr, "pn_mpi_exec: %s=%s is not an integer in %ld..%ld\n", name, s, lo, hi);
		exit(2);
	}
	return v;
}

int main(int argc, char **argv)
{
	const char *src = getenv("OMPI_COMM_WORLD_RANK") ? "OMPI_COMM_WORLD_RANK" :
			  getenv("PMI_RANK") ? "PMI_RANK" : NULL;
	long rank, ppn, nodes, node;
	char v[32];

	if (argc < 2) {
		fprintf(stderr, "usage: pn_mpi_exec PROGRAM ARGS... (run by mpirun: paranic mpirun)\n");
		return 2;
	}
	if (!src) {
		fprintf(stderr, "pn_mpi_exec: neither OMPI_COMM_WORLD_RANK nor PMI_RANK is set: "
				"run me under mpirun (paranic mpirun)\n");
		return 2;
	}
	rank = env_long(src, -1, 0, 1 << 20);
	ppn = env_long("PARANIC_PPN", 1, 1, 64);
	nodes = env_long("PARANIC_NODES", 0, 0, 1 << 16);
	node = rank / ppn;
	if (nodes && node >= nodes) {
		fprintf(stderr, "pn_mpi_exec: rank %ld with %ld per node is on node %ld, but the job has "
				"PARANIC_NODES=%ld nodes\n", rank, ppn, node, nodes);
		return 2;
	}
	snprintf(v, sizeof(v), "%ld", node);
	setenv("PARANIC_NODE", v, 1);
	snprintf(v, sizeof(v), "%ld", rank);
	setenv("PARANIC_RANK", v, 1);
	snprintf(v, sizeof(v), "%ld", rank % ppn);
	setenv("PARANIC_LOCAL_RANK", v, 1);
	if (getenv("PARANIC_MPICOLL") && *getenv("PARANIC_MPICOLL") && ppn == 1) {
		const char *lib = getenv("PARANIC_MPICOLL"), *pre = getenv("LD_PRELOAD");
		size_t n = strlen(lib) + (pre ? strlen(pre) : 0) + 2;
		char *p = malloc(n);
		if (!p)
			return 2;
		snprintf(p, n, "%s%s%s", lib, pre && *pre ? ":" : "", pre && *pre ? pre : "");
		setenv("LD_PRELOAD", p, 1);
	}
	execvp(argv[1], argv + 1);
	fprintf(stderr, "pn_mpi_exec: cannot run %s: %s\n", argv[1], strerror(errno));
	return 127;
}
