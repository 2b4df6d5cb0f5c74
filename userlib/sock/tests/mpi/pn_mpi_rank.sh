#!/bin/sh
# One rank of an Open MPI job over the socket emulation (tests/userlib/test_sock_mpi.py):
# mpirun starts this per rank; the library needs the rank's node (PARANIC_NODE), which
# only Open MPI knows (OMPI_COMM_WORLD_RANK). The job's PARANIC_NODES, PARANIC_CLUSTER,
# PARANIC_BACKEND and LD_PRELOAD come with mpirun's -x.
: "${OMPI_COMM_WORLD_RANK:?not started by Open MPI mpirun}"
PARANIC_NODE=$OMPI_COMM_WORLD_RANK
export PARANIC_NODE
exec "$@"
