/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * libparanic-mpicoll.so: MPI_Allreduce and MPI_Bcast of small vectors on the NIC's
 * collective unit (pn_coll.h), through the MPI profiling interface. `paranic mpirun` preloads it (pn_mpi_exec puts it
 * in LD_PRELOAD when PARANIC_MPICOLL names it; docs/mpi.md, "Collectives").
 *
 * MPI_Init / MPI_Init_thread open a port of their own and take the node's collective
 * unit (pn_coll_claim); the ranks use ParaNIC only if every one of them holds its node's
 * unit and rank r is on node r of a one-rank-per-node job (agreed with one
 * PMPI_Allreduce), else MPI does everything. pn_coll.h's software path is not used: it
 * needs the peers' progress on this port while they may wait inside MPI. While a call
 * waits for the unit (pn_coll_start, pn_coll_test) it keeps MPI's progress going
 * (PMPI_Test on a receive of its own), since a peer may need this rank's MPI traffic
 * before it can enter. A call goes to
 * ParaNIC when every rank can decide so from the arguments alone (MPI requires them to be
 * the same on every rank):
 *   MPI_Allreduce: comm MPI_COMM_WORLD; a predefined int32, int64, float or double type;
 *                  MPI_SUM, MPI_MIN, MPI_MAX, or MPI_BAND / MPI_BOR on the integer types;
 *                  count * size <= PN_COLL_MAX_BYTES
 *   MPI_Bcast:     comm MPI_COMM_WORLD; a predefined type; count * size <= 256 and a
 *                  multiple of 4
 * Everything else goes to the MPI library (PMPI_*). The results are the kernel's: one
 * fixed reduction order, the same bits on every rank. A ParaNIC error is returned as
 * MPI_ERR_OTHER through the communicator's error handler.
 *
 * PARANIC_MPICOLL_STATS=1: at MPI_Finalize each rank prints
 *   "pn_mpicoll rank R: N allreduce, M bcast on unit|none, K passed to MPI"
 */
#define _GNU_SOURCE
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "paranic/pn_coll.h"

static pn_port_t *port;        /* NULL: every call goes to MPI */
static int usable;             /* 1: every rank r is on node r and holds its node's unit */
static unsigned long n_allreduce, n_bcast, n_passed;
/* A receive that never completes, on a communicator of our own: MPI_Test on it turns
 * MPI's progress engine while a call waits for the unit (an MPI_Iprobe would count an
 * error completion at the libfabric provider each time it finds nothing). */
static MPI_Comm spin_comm = MPI_COMM_NULL;
static MPI_Request spin_req = MPI_REQUEST_NULL;
static char spin_buf;

static void open_port(void)
{
	if (pn_port_open(&port, NULL) < 0)
		port = NULL;   /* no ParaNIC here: MPI does everything */
}

/* After PMPI_Init: every rank takes its node's unit, and the ranks agree (through MPI)
 * to use ParaNIC only if all have it. The software path is never taken here: it needs
 * the peers' progress on this port while they may be waiting inside MPI. */
static int agree(int rc)
{
	int mine, all = 0, rank, size;
	if (rc != MPI_SUCCESS)
		return rc;
	mine = port && PMPI_Comm_rank(MPI_COMM_WORLD, &rank) == MPI_SUCCESS &&
	       PMPI_Comm_size(MPI_COMM_WORLD, &size) == MPI_SUCCESS && rank == pn_port_node(port) &&
	       size == pn_num_nodes(pn_port_hal(port)) && pn_coll_claim(port) == 0;
	mine = mine && PMPI_Comm_dup(MPI_COMM_SELF, &spin_comm) == MPI_SUCCESS &&
	       PMPI_Irecv(&spin_buf, 1, MPI_BYTE, 0, 0, spin_comm, &spin_req) == MPI_SUCCESS;
	if (PMPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD) != MPI_SUCCESS)
		all = 0;
	usable = all;
	return rc;
}

int MPI_Init(int *argc, char ***argv)
{
	open_port();
	return agree(PMPI_Init(argc, argv));
}

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
	open_port();
	return agree(PMPI_Init_thread(argc, argv, required, provided));
}

static int is_usable(void)
{
	return usable > 0;
}

/* The kernel's element type of a predefined MPI type, or -1. */
static int dtype_of(MPI_Datatype t)
{
	if (t == MPI_INT || t == MPI_INT32_T || t == MPI_UINT32_T || t == MPI_UNSIGNED)
		return sizeof(int) == 4 ? PN_COLL_T_I32 : -1;
	if (t == MPI_INT64_T || t == MPI_UINT64_T || t == MPI_LONG_LONG || t == MPI_UNSIGNED_LONG_LONG ||
	    t == MPI_LONG || t == MPI_UNSIGNED_LONG)
		return PN_COLL_T_I64;
	if (t == MPI_FLOAT)
		return PN_COLL_T_F32;
	if (t == MPI_DOUBLE)
		return PN_COLL_T_F64;
	return -1;
}

/* The kernel's operator, or -1 (unsigned MIN/MAX would compare as signed: not taken). */
static int red_of(MPI_Op op, MPI_Datatype t, int dtype)
{
	int uns = t == MPI_UINT32_T || t == MPI_UNSIGNED || t == MPI_UINT64_T || t == MPI_UNSIGNED_LONG_LONG ||
		  t == MPI_UNSIGNED_LONG;
	int flt = dtype == PN_COLL_T_F32 || dtype == PN_COLL_T_F64;
	if (op == MPI_SUM)
		return PN_COLL_RED_SUM;
	if (op == MPI_MIN && !uns)
		return PN_COLL_RED_MIN;
	if (op == MPI_MAX && !uns)
		return PN_COLL_RED_MAX;
	if (op == MPI_BAND && !flt)
		return PN_COLL_RED_AND;
	if (op == MPI_BOR && !flt)
		return PN_COLL_RED_OR;
	return -1;
}

/* Run one operation on the unit, keeping MPI's progress engine turning meanwhile (a peer
 * may still need this rank's MPI traffic before it enters the operation). */
static int run(int op, unsigned root, const void *in, void *out, size_t nbytes, int dtype, int red)
{
	int rc = pn_coll_start(port, op, root, in, nbytes, dtype, red), flag;
	while (rc == 0) {
		if ((rc = pn_coll_test(port, out)) != 0)
			break;
		PMPI_Test(&spin_req, &flag, MPI_STATUS_IGNORE);
	}
	return rc < 0 ? rc : 0;
}

static int fail(MPI_Comm comm, const char *what, int rc)
{
	fprintf(stderr, "pn_mpicoll: %s on ParaNIC failed: %s\n", what, pn_strerror(rc));
	PMPI_Comm_call_errhandler(comm, MPI_ERR_OTHER);   /* MPI_ERRORS_ARE_FATAL ends the job here */
	return MPI_ERR_OTHER;
}

int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm)
{
	int dtype = dtype_of(datatype), red, size, rc;
	size_t nbytes;
	if (comm != MPI_COMM_WORLD || count < 0 || dtype < 0 || (red = red_of(op, datatype, dtype)) < 0 ||
	    PMPI_Type_size(datatype, &size) != MPI_SUCCESS || (nbytes = (size_t)count * (size_t)size) > PN_COLL_MAX_BYTES ||
	    !is_usable()) {
		n_passed++;
		return PMPI_Allreduce(sendbuf, recvbuf, count, datatype, op, comm);
	}
	n_allreduce++;
	if ((rc = run(PN_COLL_OP_ALLREDUCE, 0, sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf, recvbuf, nbytes, dtype,
		      red)) < 0)
		return fail(comm, "MPI_Allreduce", rc);
	return MPI_SUCCESS;
}

int MPI_Bcast(void *buf, int count, MPI_Datatype datatype, int root, MPI_Comm comm)
{
	int size, rc;
	size_t nbytes;
	if (comm != MPI_COMM_WORLD || count < 0 || PMPI_Type_size(datatype, &size) != MPI_SUCCESS ||
	    (dtype_of(datatype) < 0 && datatype != MPI_BYTE && datatype != MPI_CHAR && datatype != MPI_UNSIGNED_CHAR &&
	     datatype != MPI_SHORT && datatype != MPI_UNSIGNED_SHORT) ||
	    (nbytes = (size_t)count * (size_t)size) > PN_COLL_MAX_BYTES || nbytes % 4 || root < 0 || !is_usable()) {
		n_passed++;
		return PMPI_Bcast(buf, count, datatype, root, comm);
	}
	n_bcast++;
	if ((rc = run(PN_COLL_OP_BCAST, (unsigned)root, buf, buf, nbytes, PN_COLL_T_I32, PN_COLL_RED_SUM)) < 0)
		return fail(comm, "MPI_Bcast", rc);
	return MPI_SUCCESS;
}

int MPI_Finalize(void)
{
	const char *st = getenv("PARANIC_MPICOLL_STATS");
	int rank = -1, rc;
	PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
	if (st && *st && strcmp(st, "0"))
		printf("pn_mpicoll rank %d: %lu allreduce, %lu bcast on %s, %lu passed to MPI\n", rank, n_allreduce,
		       n_bcast, usable ? "unit" : "none", n_passed);
	fflush(stdout);
	if (spin_req != MPI_REQUEST_NULL) {   /* completed by a message to itself, not cancelled */
		PMPI_Send(&spin_buf, 1, MPI_BYTE, 0, 0, spin_comm);
		PMPI_Wait(&spin_req, MPI_STATUS_IGNORE);
	}
	if (spin_comm != MPI_COMM_NULL)
		PMPI_Comm_free(&spin_comm);
	rc = PMPI_Finalize();
	if (port)
		pn_port_close(port);
	port = NULL;
	return rc;
}
