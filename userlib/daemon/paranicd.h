/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * paranicd's private header: its limits, the state of one daemon (struct paranicd,
 * handed to every function of the server) and what its files call of each other.
 *
 *   paranicd.c          command line, set-up (the NIC context, the UNIX socket), the loop
 *   paranicd_nic.c      the NIC side: outbox, HELLOs, PEER-DEAD notices, membership
 *   paranicd_clients.c  socket clients: requests, attach checks, jobs, crash clean-up
 *   paranicd_cli.c      the client commands (status, procs, jobs, job-start, job-end)
 */
#ifndef PARANICD_H
#define PARANICD_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "daemon_proto.h"
#include "hal_backend.h"
#include "paranic/pn_daemon.h"
#include "sock_wire.h"

#define MAX_CLIENTS 1024
#define DEFAULT_UID_CONNS 32          /* --max-uid-conns: a uid's connections without a context */
#define DEFAULT_IDLE_MS 5000          /* --idle-ms: such a connection idle that long is closed */
#define MAX_ALLOW 32
#define OUTBOX 8192                  /* packets (power of two) */
#define CLEANUP_WAIT_NS 3000000000ull /* a dropped connection's process must be gone by then */

struct client {
	int fd;
	pid_t pid;
	uid_t uid;
	gid_t gid;
	int attached;        /* an ATTACH was accepted on this connection */
	int detached;        /* DETACH received: a normal close */
	int32_t ctx;
	uint32_t abi;
	char job[PN_DAEMON_NAME_MAX];
	uint64_t last_ns;    /* accepted, or the last complete request */
	uint8_t in[sizeof(struct pnd_frame) + sizeof(pn_daemon_job_t)];
	size_t in_len;
};

struct cleanup {
	pid_t pid;
	int32_t ctx;
	uint64_t deadline;
	char job[PN_DAEMON_NAME_MAX];
};

struct member {
	uint64_t last_ns;    /* 0: never heard */
	uint32_t pid, addr, abi;
	int up;
	char host[PN_DAEMON_NAME_MAX];
};

struct outpkt {
	uint16_t node;
	uint8_t ctx;
	uint8_t len;
	uint64_t tag;
	uint8_t data[sizeof(struct pnd_hello)];
};

/* The daemon: its configuration (the command line) and its state. */
struct paranicd {
	/* configuration */
	const char *cluster, *backend;
	char sock[108];
	int node, nodes;
	uid_t allow_uid[MAX_ALLOW];
	gid_t allow_gid[MAX_ALLOW];
	int n_uid, n_gid;
	unsigned hello_ms, down_ms, poll_ms;
	unsigned max_uid_conns, idle_ms;
	char host[PN_DAEMON_NAME_MAX];
	struct sk_net net;
	/* state */
	pn_hal_t *h;
	int ctx, num_ctx;
	int lfd;
	struct client *cl[MAX_CLIENTS];
	int ncl;
	struct cleanup *cu;
	int ncu, cap_cu;
	struct member *mem;
	pn_daemon_job_t jobs[PN_DAEMON_MAX_JOBS];
	int njobs;
	struct outpkt out[OUTBOX];
	uint32_t out_head, out_tail;
	uint64_t hellos_sent, hellos_recv, notices_sent, cleanups, refused, out_lost;
	uint64_t conns_shed, conns_idle, conns_logged;   /* connections closed by the limits */
	uint64_t next_idle_check;
};

/* A line on stderr, prefixed with the daemon's cluster and node (paranicd.c). */
void dlog(const struct paranicd *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static inline uint64_t now_ns(void)
{
	return pn_monotonic_ns();
}

/* ---- the NIC side (paranicd_nic.c) ------------------------------------------------------------ */

/* Send what the outbox holds while the PIO window is free (never waits). */
void out_flush(struct paranicd *d);
/* A HELLO to the daemon of every other node (into the outbox). */
void send_hellos(struct paranicd *d);
/* PEER-DEAD {node, ctx} to every other context of every node (into the outbox). */
void send_notices(struct paranicd *d, int32_t ctx, pid_t pid);
/* Take the HELLOs that arrived (at most 256 packets a call). */
void nic_poll(struct paranicd *d, uint64_t now);
/* Mark nodes up or down by the age of their last HELLO. */
void membership(struct paranicd *d, uint64_t now);

/* ---- socket clients (paranicd_clients.c) ------------------------------------------------------ */

/* Accept every pending connection (credentials from SO_PEERCRED), within the limits: a
 * uid's connections without a context beyond max_uid_conns, or any when the table is
 * full, make room by closing that uid's (or the busiest uid's) oldest such connection. */
void accept_clients(struct paranicd *d);
/* Close the connections without a context idle for longer than idle_ms. */
void idle_clients(struct paranicd *d, uint64_t now);
/* Handle the complete frames in c->in. -1: drop the client. */
int client_input(struct paranicd *d, struct client *c);
/* Drop client i; an attached process that did not DETACH is queued for clean-up. */
void client_gone(struct paranicd *d, int i);
/* Clean up after the queued processes that are gone: context released, PEER-DEAD sent. */
void cleanups(struct paranicd *d, uint64_t now);

/* ---- client mode (paranicd_cli.c) ------------------------------------------------------------- */

/* Run a client command against the daemon at sock; the exit code. */
int client_cmd(const char *cmd, const char *sock, int json, pn_daemon_job_t *job);

#endif /* PARANICD_H */
