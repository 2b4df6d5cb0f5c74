/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * paranicd's client API: ask a node's daemon about the cluster (membership), the jobs
 * it knows and the processes attached to it; register and end jobs.
 *
 * One paranicd runs per node (docs/paranicd.md). It holds the node's last context
 * (PN_DAEMON_CTX), listens on a UNIX socket (pn_daemon_socket_path) and talks to the
 * other nodes' daemons over the NIC. pn_open contacts it by itself (see pn_hal.h); the
 * calls here are for tools (`paranicd status`, `paranic daemon status`) and launchers.
 *
 * Conventions as in pn_hal.h: 0 or a positive count, or a negative errno code:
 *   -ENOTCONN  no daemon answers at the socket
 *   -EACCES    the daemon refused (user not allowed); -EPROTO: protocol or ABI version
 *   -ENAMETOOLONG, -EINVAL  bad argument
 * A refusal's reason (the daemon's words) is kept per thread: pn_daemon_last_reason().
 */
#ifndef PN_DAEMON_H
#define PN_DAEMON_H

#include <stddef.h>
#include <stdint.h>

#include "pn_hal.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The daemon's reserved context on a NIC with num_ctx contexts: the last one. */
#define PN_DAEMON_CTX(num_ctx) ((num_ctx) - 1)
#define PN_DAEMON_NAME_MAX 64      /* host names, job ids (NUL included) */
#define PN_DAEMON_CMD_MAX 256      /* a job's command line as registered (NUL included) */
#define PN_DAEMON_MAX_JOBS 64      /* jobs one daemon keeps */

/* One node as a daemon sees it (membership). */
typedef struct pn_daemon_node {
	int32_t node;
	int32_t up;                 /* 1: heard within the down timeout (itself: always) */
	uint32_t pid;               /* that node's daemon's pid (0: never heard) */
	uint32_t addr;              /* the node's cluster IPv4 address, host byte order */
	int64_t age_ms;             /* since last heard (-1: never) */
	char host[PN_DAEMON_NAME_MAX];
} pn_daemon_node_t;

/* The daemon answering, about itself. */
typedef struct pn_daemon_info {
	int32_t node, nodes;
	int32_t ctx, num_ctx;       /* its reserved context, and the NIC's contexts */
	uint32_t pid, abi;          /* its pid and PN_ABI_VERSION */
	uint32_t hello_ms, down_ms; /* announce period, down timeout */
	uint64_t hellos_sent, hellos_recv, notices_sent, cleanups, refused;
	char cluster[PN_DAEMON_NAME_MAX];
	char backend[16];
	char host[PN_DAEMON_NAME_MAX];
} pn_daemon_info_t;

/* A process attached on the daemon's node (one per open context). */
typedef struct pn_daemon_proc {
	uint32_t pid, uid;
	int32_t node, ctx;
	uint32_t abi;
	uint32_t rsvd;
	char job[PN_DAEMON_NAME_MAX];   /* its $PARANIC_JOB ("" if none) */
} pn_daemon_proc_t;

/* A job (registered by a launcher: `paranic run`). */
typedef struct pn_daemon_job {
	char id[PN_DAEMON_NAME_MAX];
	uint32_t uid;               /* set by the daemon: the registering process's uid */
	int32_t nodes, ppn;
	int32_t procs;              /* processes of the job attached on this node now */
	uint64_t start_unix_ms;     /* set by the daemon */
	char command[PN_DAEMON_CMD_MAX];
} pn_daemon_job_t;

/* The socket of (cluster, node)'s daemon: $PARANIC_DAEMON_SOCKET if set, else
 * $PARANIC_DAEMON_DIR (default /tmp) /paranic-<cluster>/node<N>.sock. cluster NULL:
 * $PARANIC_CLUSTER or "default"; node < 0: $PARANIC_NODE or 0. */
int pn_daemon_socket_path(const char *cluster, int node, char *buf, size_t len);

/* Queries. sock NULL: pn_daemon_socket_path(NULL, -1). They return the number of
 * records the daemon has (at most `max` are stored; call again with more room). */
int pn_daemon_status(const char *sock, pn_daemon_info_t *info, pn_daemon_node_t *nodes, int max);
int pn_daemon_procs(const char *sock, pn_daemon_proc_t *procs, int max);
int pn_daemon_jobs(const char *sock, pn_daemon_job_t *jobs, int max);
/* Register a job (id, nodes, ppn, command; uid and start time are the daemon's), or
 * end it. -EEXIST: an id already registered; -ENOENT: no such job; -ENOSPC: full. */
int pn_daemon_job_start(const char *sock, const pn_daemon_job_t *job);
int pn_daemon_job_end(const char *sock, const char *id);

/* The daemon's reason for the last refusal seen by this thread ("" if none). */
const char *pn_daemon_last_reason(void);

#ifdef __cplusplus
}
#endif
#endif /* PN_DAEMON_H */
